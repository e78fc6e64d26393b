#!/bin/bash
# Weights prepared at conversion (codegen/c/cg_prepare.c, runtime mg_conv2d_prepare)
# as a user meets them: the weights file records the layout version, a file or a
# runtime of another layout is an init error (never wrong numbers), and blobs made
# for another micro-kernel's panel height (--cpu-pack 8: aarch64's) or with none
# (--cpu-pack none) give torch's numbers too; --threads 2 gives one thread's bits. tiny_cnn's convolutions take every
# prepared path: Winograd (the 3x3 on 16x16) and packed GEMM (the strided 3x3).
# usage: tests/e2e/cpu_prepared.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
BUILD=$(cd "$BUILD" && pwd)
MIGC=$BUILD/migc
NPYCMP=$BUILD/tests/npycmp
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
check() { # description command... (passes when the command succeeds)
  local what=$1; shift
  if "$@" > "$work/last.log" 2>&1; then pass=$((pass + 1)); echo "ok   $what"
  else fail=$((fail + 1)); echo "FAIL $what"; sed 's/^/     /' "$work/last.log" | head -5; fi
}
in=samples/tiny_cnn_input.npy ref=samples/tiny_cnn_logits.npy
# convert_to DIR [FLAGS...]: converts tiny_cnn and builds it warning-free
convert_to() {
  local d=$1; shift
  "$MIGC" convert samples/tiny_cnn.onnx --input-shape input=1x3x32x32 --cpu-only -o "$d" "$@" >/dev/null &&
    make -s -C "$d/cpu" WERROR=-Werror >/dev/null
}
# matches DIR [RUNNER FLAGS...]: the runner's logits agree with torch's
matches() {
  local d=$1; shift
  "$d/cpu/runner" --input input=$in --output-dir "$d/o" "$@" && "$NPYCMP" "$d/o/logits.npy" $ref
}
version_at_24() { od -An -tu8 -j24 -N8 "$1" | tr -d ' '; }

check "convert with prepared weights" convert_to "$work/p"
check "the project prepares weights (mg_conv2d_params with a preparation)" \
  grep -qE 'mg_conv2d_params cg_k[0-9]+ = \{.*, [12], [0-9]+\}' "$work/p/cpu/model.c"
check "the weights header records layout version 1" bash -c "[ \"\$(od -An -tu8 -j24 -N8 '$work/p/cpu/model.weights' | tr -d ' ')\" = 1 ]"
check "prepared weights match torch" matches "$work/p"
check "a weights file of another layout version: init error, exit 2" bash -c "
  cp '$work/p/cpu/model.weights' '$work/v2.weights'
  printf '\\002' | dd of='$work/v2.weights' bs=1 seek=24 conv=notrunc status=none
  '$work/p/cpu/runner' --weights '$work/v2.weights' --input input=$in --output-dir '$work/o'; [ \$? -eq 2 ]"
check "a runtime of another layout version: init error naming the layout, exit 2" bash -c "
  cp -r '$work/p' '$work/rt2' && make -s -C '$work/rt2/cpu' clean >/dev/null 2>&1
  make -s -C '$work/rt2/cpu' OPT='-O1 -DMG_RT_PACK_VERSION=2' >/dev/null
  '$work/rt2/cpu/runner' --input input=$in --output-dir '$work/o' 2>&1 | tee '$work/rt2.log'
  [ \${PIPESTATUS[0]} -eq 2 ] && grep -q 'layout' '$work/rt2.log'"
check "--cpu-pack 8 (another kernel's panels: repacked per call) matches torch" \
  bash -c "'$MIGC' convert samples/tiny_cnn.onnx --input-shape input=1x3x32x32 --cpu-only -o '$work/p8' --cpu-pack 8 >/dev/null &&
    make -s -C '$work/p8/cpu' >/dev/null && '$work/p8/cpu/runner' --input input=$in --output-dir '$work/p8/o' &&
    '$NPYCMP' '$work/p8/o/logits.npy' $ref"
check "--cpu-pack none: no preparation, version 0, matches torch" bash -c "
  '$MIGC' convert samples/tiny_cnn.onnx --input-shape input=1x3x32x32 --cpu-only -o '$work/pn' --cpu-pack none >/dev/null &&
  make -s -C '$work/pn/cpu' >/dev/null && [ \"\$(od -An -tu8 -j24 -N8 '$work/pn/cpu/model.weights' | tr -d ' ')\" = 0 ] &&
  '$work/pn/cpu/runner' --input input=$in --output-dir '$work/pn/o' && '$NPYCMP' '$work/pn/o/logits.npy' $ref"
check "--cpu-pack 0: exit 2" bash -c "'$MIGC' convert samples/tiny_cnn.onnx --cpu-only -o '$work/x' --cpu-pack 0; [ \$? -eq 2 ]"
check "--threads 2: bit-identical to one thread, and to the one-thread project" bash -c "
  '$MIGC' convert samples/tiny_cnn.onnx --input-shape input=1x3x32x32 --cpu-only -o '$work/t2' --threads 2 >/dev/null &&
  make -s -C '$work/t2/cpu' WERROR=-Werror >/dev/null && grep -q mg_conv2d_mt '$work/t2/cpu/model.c' &&
  '$work/t2/cpu/runner' --input input=$in --output-dir '$work/t2/o2' --repeat 3 | grep -q median_ms &&
  '$work/t2/cpu/runner' --input input=$in --output-dir '$work/t2/o1' --threads 1 &&
  cmp '$work/t2/o1/logits.npy' '$work/t2/o2/logits.npy' && cmp '$work/t2/o2/logits.npy' '$work/p/o/logits.npy'"
check "--threads beyond the converted count: exit 2" bash -c "
  '$work/t2/cpu/runner' --input input=$in --output-dir '$work/t2/o3' --threads 3; [ \$? -eq 2 ]"
check "a one-thread project refuses --threads 2: exit 2" bash -c "
  '$work/p/cpu/runner' --input input=$in --output-dir '$work/o' --threads 2; [ \$? -eq 2 ]"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
