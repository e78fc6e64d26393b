#!/bin/bash
# Import speed and peak memory of `migc inspect` on a model with >= 300 MB of
# initializers, inline and as external data, against the peer a user would run
# otherwise: onnx.load (+ checker) in Python. Five runs each, median reported.
# usage: bench/import_speed.sh BUILD_DIR
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
dir=build/bench
mkdir -p "$dir"
[ -f "$dir/big.onnx" ] || /usr/bin/python3 tests/fixtures/make_big_model.py -o "$dir/big.onnx" --mb 320 >/dev/null
[ -f "$dir/big_ext.onnx" ] || /usr/bin/python3 tests/fixtures/make_big_model.py -o "$dir/big_ext.onnx" --mb 320 --external >/dev/null
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
measure() { # label command...
  local label=$1; shift
  local t=() m=()
  for _ in 1 2 3 4 5; do
    /usr/bin/time -o "$dir/time.txt" -f '%e %M' "$@" >/dev/null 2>&1
    out=$(tail -1 "$dir/time.txt")
    t+=("${out% *}"); m+=("${out#* }")
  done
  printf '| %-44s | %8s s | %8.1f MB |\n' "$label" "$(printf '%s\n' "${t[@]}" | median)" \
    "$(printf '%s\n' "${m[@]}" | median | awk '{print $1/1024}')"
}
size=$(stat -c %s "$dir/big.onnx")
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; model: $((size / 1000000)) MB"
echo "| what | median time | median peak RSS |"
echo "|---|---|---|"
measure "migc inspect (initializers in the file)" "$BUILD/migc" inspect "$dir/big.onnx"
measure "migc inspect (external data)" "$BUILD/migc" inspect "$dir/big_ext.onnx"
measure "python onnx.load (peer)" /usr/bin/python3 -c "import onnx,sys; onnx.load(sys.argv[1])" "$dir/big.onnx"
measure "python onnx.load + checker (peer)" /usr/bin/python3 -c "import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]))" "$dir/big.onnx"
