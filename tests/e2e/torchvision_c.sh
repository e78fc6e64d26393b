#!/bin/bash
# Generated C against PyTorch: torchvision models with random, perturbed weights
# (BatchNorm statistics perturbed, so no norm is an identity), exported at opset 17
# by default and with TrainingMode.PRESERVE. Each is converted with `migc convert`,
# built with `make WERROR=-Werror` (-std=c99 -Wall -Wextra -pedantic), run by its
# runner, and must match torch's eval output within max|err| <= 1e-4 * max|out| and
# cosine >= 0.99999. The runner's peak RSS must stay within weights + arena + 16 MB,
# and the arena within 1.25x the lower bound the conversion prints.
# usage: tests/e2e/torchvision_c.sh BUILD_DIR [MODELS] [CC]
set -u
BUILD=${1:-build}
. "$(dirname "$0")/zoo_lists.sh"
MODELS=${2:-$ZOO_TEST}
CCOMP=${3:-cc}
cd "$(dirname "$0")/../.."
. tests/e2e/par.sh
BUILD=$(cd "$BUILD" && pwd)
out=build/fixtures/tv
mkdir -p "$out"
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$out" --models "$MODELS" \
  --opsets 17 --modes default,preserve --refs >/dev/null || { echo "export failed"; exit 1; }
work=$(mktemp -d)
# Every project compiles the same runtime sources with the same flags: ccache (when
# installed, as make setup does) compiles them once.
cache=""
if command -v ccache >/dev/null; then cache="ccache "; export CCACHE_DIR=${CCACHE_DIR:-$PWD/build/ccache}; fi
trap 'rm -rf "$work"' EXIT
# one MODEL MODE: converts, builds, runs and checks one export; prints its ok/FAIL line
one() {
  local model=$1 mode=$2 f dir start res arena weights lower rss_kb budget_kb ratio
  f="$out/${model}_op17_${mode}.onnx"
  dir="$work/${model}_${mode}"
  start=$SECONDS
  if ! "$BUILD/migc" convert "$f" -o "$dir" --cpu-only > "$dir.convert.log" 2>&1; then
    echo "FAIL ${model} ${mode}: convert: $(grep -m1 -E 'error|unsupported' "$dir.convert.log")"; return
  fi
  if grep -q "not converted" "$dir.convert.log" && ! grep -q " 0 not converted" "$dir.convert.log"; then
    echo "FAIL ${model} ${mode}: $(grep -m3 'cpu:' "$dir.convert.log" | tr '\n' ' ')"; return
  fi
  if ! make -s -j"$(nproc)" -C "$dir/cpu" CC="$cache$CCOMP" WERROR=-Werror > "$dir.make.log" 2>&1; then
    echo "FAIL ${model} ${mode}: build: $(grep -m1 -E 'error|warning' "$dir.make.log")"; return
  fi
  if ! /usr/bin/time -f '%M' -o "$dir.rss" "$dir/cpu/runner" --input input="$out/${model}_input.npy" \
       --output-dir "$dir" > "$dir.run.log" 2>&1; then
    echo "FAIL ${model} ${mode}: run: $(head -1 "$dir.run.log")"; return
  fi
  if ! res=$("$BUILD/tests/npycmp" "$dir/output.npy" "$out/${model}_output.npy"); then
    echo "FAIL ${model} ${mode}: $res"; return
  fi
  arena=$(sed -nE 's/^#define MODEL_ARENA_BYTES ([0-9]+)u/\1/p' "$dir/cpu/model.h")
  weights=$(sed -nE 's/^#define MODEL_WEIGHTS_BYTES ([0-9]+)u/\1/p' "$dir/cpu/model.h")
  lower=$(sed -nE 's/.*lower bound ([0-9]+)\)?.*/\1/p' "$dir/cpu/model.h" | head -1)
  rss_kb=$(tail -1 "$dir.rss")
  budget_kb=$(( (arena + weights) / 1024 + 16384 ))
  ratio=$(awk -v a="$arena" -v l="$lower" 'BEGIN { printf "%.3f", (l > 0 ? a / l : 1) }')
  if [ "$rss_kb" -gt "$budget_kb" ]; then
    echo "FAIL ${model} ${mode}: peak RSS ${rss_kb} KiB > weights + arena + 16 MiB = ${budget_kb} KiB"; return
  fi
  if awk -v r="$ratio" 'BEGIN { exit !(r > 1.25) }'; then
    echo "FAIL ${model} ${mode}: arena ${arena} is ${ratio}x the lower bound ${lower}"; return
  fi
  echo "ok   ${model} ${mode} ($((SECONDS - start)) s): $res; arena ${ratio}x lower bound; RSS ${rss_kb}/${budget_kb} KiB"
}
# as many at once as there are cores, each build itself parallel; lines in order
results=()
for model in ${MODELS//,/ }; do
  for mode in default preserve; do
    r="$work/result_${model}_${mode}"; results+=("$r")
    one "$model" "$mode" > "$r" 2>&1 &
    par_wait_slot
  done
done
wait
cat "${results[@]}"
pass=$(cat "${results[@]}" | grep -c '^ok') fail=$(( ${#results[@]} - $(cat "${results[@]}" | grep -c '^ok') ))
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
