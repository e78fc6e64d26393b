#!/bin/bash
# CPU int8 against fp32 (issue 17, acceptance 2): the generated runner of one model
# converted twice, --precision fp32 and --precision int8 (calibrated on CALIB seeded
# inputs: the speed does not depend on the scales), one thread, pinned to one core,
# interleaved: ROUNDS rounds each time RUNS runs of fp32 then of int8 (--repeat
# --cpu-time after one warm-up). The figures are medians over the rounds of each
# round's median CPU time per run, and the same for wall time; the load average is
# printed at the start and the end. The int8 output's top-1 is checked against the
# fp32 one on the fixture input.
#
# usage: bench/int8_speed.sh BUILD_DIR [MODEL] [RUNS] [ROUNDS] [CALIB]
#   BENCH_CORES  the core to pin to (default 1)
set -euo pipefail
BUILD=${1:-build}
MODEL=${2:-resnet50}
RUNS=${3:-11}
ROUNDS=${4:-3}
CALIB=${5:-4}
CORE=${BENCH_CORES:-1}
cd "$(dirname "$0")/.."
BUILD=$(cd "$BUILD" && pwd)
tv=build/fixtures/tv
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models "$MODEL" --opsets 17 --modes default \
  --refs >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f=$tv/${MODEL}_op17_default.onnx w=$tv/$MODEL.pth input=$tv/${MODEL}_input.npy
/usr/bin/python3 tests/fixtures/int8_measure.py inputs "$work/cal" "$CALIB" 0 1x3x224x224
"$BUILD/migc" convert "$f" --weights "$w" --cpu-only -o "$work/fp32" >/dev/null 2>&1 || { echo "fp32 convert failed"; exit 1; }
"$BUILD/migc" convert "$f" --weights "$w" --cpu-only --precision int8 --calibrate "$work/cal" -o "$work/int8" \
  > "$work/int8.log" 2>&1 || { echo "int8 convert failed"; cat "$work/int8.log"; exit 1; }
for p in fp32 int8; do
  make -s -C "$work/$p/cpu" >/dev/null
  "$work/$p/cpu/runner" --input input="$input" --output-dir "$work/$p.out" >/dev/null
done
top1=$(/usr/bin/python3 -c 'import numpy as np, sys; a, b = (np.load(f) for f in sys.argv[1:]); print(int(a.argmax() == b.argmax()))' \
  "$work/fp32.out/output.npy" "$work/int8.out/output.npy")
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for _ in $(seq "$ROUNDS"); do
  for p in fp32 int8; do
    taskset -c "$CORE" "$work/$p/cpu/runner" --input input="$input" --output-dir "$work/$p.out" --repeat "$RUNS" \
      --cpu-time > "$work/$p.run"
    awk '/median_cpu_ms/ {print $2}' "$work/$p.run" >> "$work/$p.cpu"
    awk '/^median_ms/ {print $2}' "$work/$p.run" >> "$work/$p.wall"
  done
done
c32=$(median < "$work/fp32.cpu") c8=$(median < "$work/int8.cpu") w32=$(median < "$work/fp32.wall") w8=$(median < "$work/int8.wall")
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); one thread, taskset -c $CORE"
echo "load average: $load0 at start, $(cut -d' ' -f1-3 /proc/loadavg) at end; $ROUNDS interleaved rounds of $RUNS runs"
echo "$(grep -m1 'Conv/Gemm' "$work/int8.log" | sed 's/convert: //')"
echo
echo "| $MODEL, batch 1, 1 thread | fp32 | int8 | fp32 / int8 |"
echo "|---|---|---|---|"
awk -v a="$c32" -v b="$c8" 'BEGIN { printf "| CPU time per run (ms) | %.1f | %.1f | %.2fx |\n", a, b, a / b }'
awk -v a="$w32" -v b="$w8" 'BEGIN { printf "| wall time per run (ms) | %.1f | %.1f | %.2fx |\n", a, b, a / b }'
echo
echo "int8 top-1 on the fixture input agrees with fp32: $([ "$top1" = 1 ] && echo yes || echo NO)"
