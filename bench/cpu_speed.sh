#!/bin/bash
# Generated C (migc convert --target cpu) against its peers, interleaved in one run:
# ONNX Runtime (onnxruntime-node) and PyTorch, batch 1, 224x224. For each model
# and each thread count, ROUNDS rounds each run the generated runner, ORT and
# PyTorch in turn (RUNS timed inferences after a warm-up, median); the figure is
# the median of the rounds' medians, so a burst of load from other jobs hits all
# three alike. Each process is pinned (taskset) to the first N cores of
# BENCH_CORES for N threads (the projects are converted with --threads of the most
# asked for; the runner's --threads picks each count). Prints the load average
# with each table.
# Also: conversion time of resnet50 (compiler not counted).
#
# usage: bench/cpu_speed.sh BUILD_DIR [MODELS] [RUNS] [ROUNDS]
#   BENCH_THREADS  thread counts to measure, e.g. "1 2" (default "1")
#   BENCH_CORES    cores to pin to, in order (default "0,1")
#   BENCH_BASE     a folder of earlier projects (BASE/<model>/cpu/runner): also
#                  measured, interleaved, as the "before" column
#   BENCH_TORCH    0 to leave PyTorch out (default 1); BENCH_TORCH_RUNS caps its
#                  runs per round (vit_b_16 takes seconds per run), default 5
set -euo pipefail
BUILD=${1:-build}
MODELS=${2:-resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,shufflenet_v2_x1_0,convnext_tiny,vit_b_16}
RUNS=${3:-11}
ROUNDS=${4:-3}
THREADS=${BENCH_THREADS:-1}
CORES=${BENCH_CORES:-0,1}
TORCH=${BENCH_TORCH:-1}
TORCH_RUNS=${BENCH_TORCH_RUNS:-5}
BASE=${BENCH_BASE:-}
cd "$(dirname "$0")/.."
BUILD=$(cd "$BUILD" && pwd)
tv=build/fixtures/tv
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models "$MODELS,resnet50" --opsets 17 \
  --modes default --refs >/dev/null
[ -d bench/node_modules/onnxruntime-node ] || (cd bench && npm install --ignore-scripts --no-audit --no-fund >/dev/null)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
IFS=, read -r -a core_list <<<"$CORES"

# cores N: the first N cores of BENCH_CORES, comma-separated
cores() { local IFS=,; echo "${core_list[*]:0:$1}"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

maxt=1
for nt in $THREADS; do [ "$nt" -gt "$maxt" ] && maxt=$nt; done
for model in ${MODELS//,/ }; do
  f=$tv/${model}_op17_default.onnx
  "$BUILD/migc" convert "$f" -o "$work/$model" --cpu-only --threads "$maxt" >/dev/null 2>&1 ||
    { echo "$model: convert failed"; exit 1; }
  make -s -j"$(nproc)" -C "$work/$model/cpu" >/dev/null
  "$work/$model/cpu/runner" --input input="$tv/${model}_input.npy" --output-dir "$work/$model" >/dev/null
  "$BUILD/tests/npycmp" "$work/$model/output.npy" "$tv/${model}_output.npy" >/dev/null ||
    { echo "$model: generated C disagrees with torch"; exit 1; }
done

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; pinned to cores $CORES"
echo "compiler: $(cc --version | head -1), flags -O3 -march=native (the generated Makefile's default)"
echo "each figure: median over $ROUNDS interleaved rounds of the median of $RUNS runs (PyTorch: $TORCH_RUNS)"
for nt in $THREADS; do
  pin=$(cores "$nt")
  thr="--threads $nt"
  echo
  echo "threads: $nt (taskset -c $pin); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  hdr="| model (batch 1) |"; sep="|---|"
  [ -n "$BASE" ] && hdr="$hdr before |" && sep="$sep---|"
  hdr="$hdr generated C | ONNX Runtime |"; sep="$sep---|---|"
  [ "$TORCH" = 1 ] && hdr="$hdr PyTorch |" && sep="$sep---|"
  hdr="$hdr C / ORT |"; sep="$sep---|"
  [ "$TORCH" = 1 ] && hdr="$hdr C / PyTorch |" && sep="$sep---|"
  echo "$hdr"; echo "$sep"
  logsum=0 n=0 worst=0 slower_than_torch=0
  for model in ${MODELS//,/ }; do
    f=$tv/${model}_op17_default.onnx input=$tv/${model}_input.npy
    : >"$work/c" ; : >"$work/o"; : >"$work/p"; : >"$work/b"
    for _ in $(seq "$ROUNDS"); do
      if [ -n "$BASE" ]; then
        taskset -c "$pin" "$BASE/$model/cpu/runner" --input input="$input" --output-dir "$work/base" \
          --repeat "$RUNS" | awk '/median_ms/ {print $2}' >>"$work/b"
      fi
      taskset -c "$pin" "$work/$model/cpu/runner" --input input="$input" --output-dir "$work/$model" \
        --repeat "$RUNS" $thr | awk '/median_ms/ {print $2}' >>"$work/c"
      taskset -c "$pin" node bench/ort_run.js "$f" "$input" "$RUNS" "$nt" | awk '{print $2}' >>"$work/o"
      if [ "$TORCH" = 1 ]; then
        taskset -c "$pin" /usr/bin/python3 bench/torch_run.py "$model" "$tv/$model.pth" "$input" \
          "$TORCH_RUNS" "$nt" | awk '{print $2}' >>"$work/p"
      fi
    done
    c=$(median <"$work/c") o=$(median <"$work/o")
    row="| $model |"
    [ -n "$BASE" ] && row="$row $(median <"$work/b") ms |"
    row="$row $c ms | $o ms |"
    r_ort=$(awk -v c="$c" -v o="$o" 'BEGIN { printf "%.3f", c / o }')
    if [ "$TORCH" = 1 ]; then
      p=$(median <"$work/p")
      r_torch=$(awk -v c="$c" -v p="$p" 'BEGIN { printf "%.3f", c / p }')
      row="$row $p ms | $r_ort | $r_torch |"
      awk -v r="$r_torch" 'BEGIN { exit !(r >= 1) }' && slower_than_torch=$((slower_than_torch + 1))
    else
      row="$row $r_ort |"
    fi
    echo "$row"
    logsum=$(awk -v s="$logsum" -v r="$r_ort" 'BEGIN { print s + log(r) }'); n=$((n + 1))
    worst=$(awk -v w="$worst" -v r="$r_ort" 'BEGIN { print (r > w ? r : w) }')
  done
  geo=$(awk -v s="$logsum" -v n="$n" 'BEGIN { printf "%.3f", exp(s / n) }')
  echo
  echo "threads $nt: geometric mean C / ORT $geo; worst $worst; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  [ "$TORCH" = 1 ] && echo "models not faster than PyTorch: $slower_than_torch"
done
t=()
for _ in 1 2 3 4 5; do
  s=$(date +%s.%N)
  "$BUILD/migc" convert "$tv/resnet50_op17_default.onnx" -o "$work/r50" --cpu-only --force >/dev/null 2>&1
  t+=("$(awk -v s="$s" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f", e - s }')")
done
echo
echo "convert resnet50 (--cpu-only, wall, median of 5): $(printf '%s\n' "${t[@]}" | sort -g | sed -n 3p) s"
