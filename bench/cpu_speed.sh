#!/bin/bash
# Generated C (migc convert --target cpu) against its peers, measured in the same
# run, one thread each, batch 1, 224x224: ONNX Runtime (onnxruntime-node,
# intraOpNumThreads=1) and PyTorch (torch.set_num_threads(1)). Each runs RUNS timed
# inferences after a warm-up and reports the median; all are pinned to one core.
# Also: conversion time (resnet50 must convert in under 1 s, compiler not counted).
# usage: bench/cpu_speed.sh BUILD_DIR [MODELS] [RUNS]
set -euo pipefail
BUILD=${1:-build}
MODELS=${2:-resnet18,mobilenet_v2,efficientnet_b0,vit_b_16}
RUNS=${3:-21}
cd "$(dirname "$0")/.."
BUILD=$(cd "$BUILD" && pwd)
tv=build/fixtures/tv
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models "$MODELS,resnet50" --opsets 17 \
  --modes default --refs >/dev/null
[ -d bench/node_modules/onnxruntime-node ] || (cd bench && npm install --ignore-scripts --no-audit --no-fund >/dev/null)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
core=${BENCH_CORE:-0}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), one core (taskset -c $core)"
echo "compiler: $(cc --version | head -1), flags -O3 -march=native (the generated Makefile's default)"
echo
echo "| model (batch 1) | generated C | ONNX Runtime | PyTorch | C / ORT | C / PyTorch |"
echo "|---|---|---|---|---|---|"
logsum=0 n=0 worst=0 slower_than_torch=0
for model in ${MODELS//,/ }; do
  f=$tv/${model}_op17_default.onnx input=$tv/${model}_input.npy
  "$BUILD/migc" convert "$f" -o "$work/$model" --cpu-only >/dev/null 2>&1
  make -s -j"$(nproc)" -C "$work/$model/cpu" >/dev/null
  c=$(taskset -c "$core" "$work/$model/cpu/runner" --input input="$input" --output-dir "$work/$model" --repeat "$RUNS" | awk '/median_ms/ {print $2}')
  "$BUILD/tests/npycmp" "$work/$model/output.npy" "$tv/${model}_output.npy" >/dev/null || { echo "$model: generated C disagrees with torch"; exit 1; }
  o=$(taskset -c "$core" node bench/ort_run.js "$f" "$input" "$RUNS" | awk '{print $2}')
  p=$(taskset -c "$core" /usr/bin/python3 bench/torch_run.py "$model" "$tv/$model.pth" "$input" "$RUNS" | awk '{print $2}')
  read -r r_ort r_torch < <(awk -v c="$c" -v o="$o" -v p="$p" 'BEGIN { printf "%.3f %.3f\n", c / o, c / p }')
  echo "| $model | $c ms | $o ms | $p ms | ${r_ort} | ${r_torch} |"
  logsum=$(awk -v s="$logsum" -v r="$r_ort" 'BEGIN { print s + log(r) }'); n=$((n + 1))
  worst=$(awk -v w="$worst" -v r="$r_ort" 'BEGIN { print (r > w ? r : w) }')
  awk -v r="$r_torch" 'BEGIN { exit !(r >= 1) }' && slower_than_torch=$((slower_than_torch + 1))
done
geo=$(awk -v s="$logsum" -v n="$n" 'BEGIN { printf "%.3f", exp(s / n) }')
echo
echo "geometric mean C / ORT: $geo (target <= 1.5); worst: $worst (target <= 2.5); models not faster than PyTorch: $slower_than_torch"
t=()
for _ in 1 2 3 4 5; do
  s=$(date +%s.%N)
  "$BUILD/migc" convert "$tv/resnet50_op17_default.onnx" -o "$work/r50" --cpu-only --force >/dev/null 2>&1
  t+=("$(awk -v s="$s" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f", e - s }')")
done
echo "convert resnet50 (--cpu-only, wall, median of 5): $(printf '%s\n' "${t[@]}" | sort -g | sed -n 3p) s (target < 1 s)"
