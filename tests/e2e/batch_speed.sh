#!/bin/bash
# Issue 14's speed acceptance: `migc batch -j 1` over four models takes at most 1.2x
# the sum of the same models' separate steps, run by hand one after the other:
# `migc convert`, `make` in cpu/ (with the -j the batch gives a compile: the cores,
# at -j 1), and the run against the reference (`migc verify --backend c`, which runs
# the runner). The bare runner's time is printed too. Compiles use plain cc (no
# ccache) on both sides, as a user's first run does. docs/performance.md has the
# figures. (make test-zoo; about 3 minutes on 2 cores.)
# usage: tests/e2e/batch_speed.sh BUILD_DIR [MODELS]
set -u
BUILD=${1:-build}
MODELS=${2:-squeezenet1_1,mobilenet_v3_small,resnet18,shufflenet_v2_x1_0}
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=$(cd "$BUILD" && pwd)
MIGC=$BUILD/migc
fix=build/fixtures/batch-zoo
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CC=cc
unset CCACHE_DIR
mkdir -p "$fix"
add() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a + b }'; }
for m in ${MODELS//,/ }; do
  [ -f "$fix/$m/ref.json" ] || /usr/bin/python3 tools/torch_reference.py tests.fixtures.batch_models:$m --input-shape 1x3x224x224 \
    --perturb -o "$fix/$m" > "$fix/$m.log" 2>&1 || { echo "FAIL torch_reference.py $m"; exit 1; }
done
t() { local s; s=$(date +%s.%N); "$@" > /dev/null 2>&1 || echo "step failed: $*" >&2; add "$(date +%s.%N)" "-$s"; }
jobs=$(nproc)
sum=0
printf '%-22s %8s %8s %8s %8s %8s\n' model convert build verify total runner
for m in ${MODELS//,/ }; do
  d=$work/sep/$m
  c=$(t "$MIGC" convert "$fix/$m/model.onnx" --weights "$fix/$m/model.pth" --target cpu -o "$d")
  b=$(t make -s -j"$jobs" -C "$d/cpu" runner)
  v=$(t "$MIGC" verify "$d" --reference "$fix/$m/ref.npz" --backend c --json "$d/v.json")
  /usr/bin/python3 -c "import numpy as np,sys; np.save(sys.argv[2], np.load(sys.argv[1])['inputs/input'])" \
    "$fix/$m/ref.npz" "$d/x.npy"
  r=$(t "$d/cpu/runner" --input input="$d/x.npy" --output-dir "$d/o")
  tot=$(add "$(add "$c" "$b")" "$v")
  sum=$(add "$sum" "$tot")
  printf '%-22s %8.2f %8.2f %8.2f %8.2f %8.3f\n' "$m" "$c" "$b" "$v" "$tot" "$r"
done
{
  echo '{"models": ['
  first=1
  for m in ${MODELS//,/ }; do
    [ $first = 1 ] || echo ","
    first=0
    echo "{\"name\": \"$m\", \"onnx\": \"$ROOT/$fix/$m/model.onnx\", \"weights\": \"$ROOT/$fix/$m/model.pth\", \"reference\": \"$ROOT/$fix/$m\"}"
  done
  echo ']}'
} > "$work/four.json"
bt=$(t "$MIGC" batch "$work/four.json" -o "$work/batch" -j 1)
passed=$(jq -r .summary.passed "$work/batch/report.json")
ratio=$(awk -v a="$bt" -v b="$sum" 'BEGIN { printf "%.3f", a / b }')
echo "separate steps: $sum s; migc batch -j 1: $bt s ($passed of 4 passed); ratio $ratio (acceptance <= 1.2)"
jq -r '.models[] | "  batch: \(.name): convert \(.measurements.convert_s) s, build \(.targets.cpu.measurements.build_s) s, verify \(.targets.cpu.measurements.verify_s) s, total \(.measurements.total_s) s"' "$work/batch/report.json"
[ "$passed" = 4 ] && awk -v r="$ratio" 'BEGIN { exit !(r <= 1.2) }'
