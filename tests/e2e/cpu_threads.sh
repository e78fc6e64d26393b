#!/bin/bash
# Generated C on threads (convert --threads 4; runtime/mg_rt_pool.h): for each model
# the one binary run at --threads 1, 2, 3 and 4 writes the same bytes, and they
# match torch. vit_tiny is also built with the split thresholds at 1, so that every
# split kernel (convolution, GEMM plain / prepared-B / batched, elementwise,
# Softmax, LayerNorm, copies) is split even at its size; that build must give the
# one-thread project's bytes, and a ThreadSanitizer build of it must run clean on
# 3 threads. Pooling's split is under ThreadSanitizer in test_rt_pool_tsan.
# MIGC_THREADS_MODELS replaces the model list (make test-zoo: vit_b_16 and resnet50
# too, tests/e2e/zoo.sh).
# usage: tests/e2e/cpu_threads.sh BUILD_DIR
set -u
BUILD=${1:-build}
MODELS=${MIGC_THREADS_MODELS:-resnet18 mobilenet_v2 vit_tiny}
cd "$(dirname "$0")/../.."
BUILD=$(cd "$BUILD" && pwd)
MIGC=$BUILD/migc
NPYCMP=$BUILD/tests/npycmp
out=build/fixtures/tv
mkdir -p "$out"
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$out" --models "$(echo $MODELS vit_tiny | tr ' ' ,)" \
  --opsets 17 --modes default --refs >/dev/null || { echo "export failed"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cache=""
if command -v ccache >/dev/null; then cache="ccache "; export CCACHE_DIR=${CCACHE_DIR:-$PWD/build/ccache}; fi
pass=0 fail=0
check() { # description command... (passes when the command succeeds)
  local what=$1; shift
  if "$@" > "$work/last.log" 2>&1; then pass=$((pass + 1)); echo "ok   $what"
  else fail=$((fail + 1)); echo "FAIL $what"; sed 's/^/     /' "$work/last.log" | head -8; fi
}
# project MODEL DIR [MAKE ARGS...]: converts MODEL on 4 threads into DIR and builds it warning-free
project() {
  local model=$1 dir=$2; shift 2
  "$MIGC" convert "$out/${model}_op17_default.onnx" -o "$dir" --cpu-only --threads 4 >/dev/null &&
    make -s -j2 -C "$dir/cpu" CC="$cache${CC:-cc}" WERROR=-Werror "$@" >/dev/null
}
# same_bytes MODEL DIR: runs DIR's runner at 1..4 threads; all outputs identical, and torch's
same_bytes() {
  local model=$1 dir=$2 t
  for t in 1 2 3 4; do
    "$dir/cpu/runner" --input input="$out/${model}_input.npy" --output-dir "$dir/o$t" --threads $t >/dev/null || return 1
  done
  for t in 2 3 4; do cmp "$dir/o1/output.npy" "$dir/o$t/output.npy" || return 1; done
  "$NPYCMP" "$dir/o4/output.npy" "$out/${model}_output.npy"
}

for model in $MODELS; do
  d=$work/$model
  check "$model: converts and builds on 4 threads" project "$model" "$d"
  check "$model: its convolutions and GEMMs on the pool" grep -qE 'mg_(conv2d|sgemm|sgemm_prepb)_mt\(m->pool' "$d/cpu/model.c"
  check "$model: --threads 1, 2, 3, 4 give the same bytes, and torch's numbers" same_bytes "$model" "$d"
done

split_all="-O3 -DMG_PAR_MIN_ELEMS=1 -DMG_PAR_MIN_FLOPS=1"
check "vit_tiny, every op split (thresholds 1): converts and builds" project vit_tiny "$work/vs" OPT="$split_all"
check "vit_tiny: every split kernel emitted" bash -c "
  for k in conv2d sgemm sgemm_prepb matmul_batched unary_f32 binary_f32 softmax_f32 layernorm copy_nd; do
    grep -q \"mg_\${k}_mt(m->pool\" '$work/vs/cpu/model.c' || { echo \"no mg_\${k}_mt\"; exit 1; }; done"
check "vit_tiny, every op split: --threads 1..4 the same bytes, and torch's" same_bytes vit_tiny "$work/vs"
check "vit_tiny, every op split, 4 threads: the bytes of the one-thread project" bash -c "
  '$MIGC' convert '$out/vit_tiny_op17_default.onnx' -o '$work/v1' --cpu-only >/dev/null &&
  make -s -C '$work/v1/cpu' CC='$cache${CC:-cc}' >/dev/null &&
  '$work/v1/cpu/runner' --input input='$out/vit_tiny_input.npy' --output-dir '$work/v1/o' >/dev/null &&
  cmp '$work/v1/o/output.npy' '$work/vs/o4/output.npy'"
tsan_cc=gcc
command -v clang >/dev/null && tsan_cc=clang
check "vit_tiny, every op split, ThreadSanitizer ($tsan_cc): 3 threads run clean, one thread's bytes" bash -c "
  cp -r '$work/vs' '$work/vt' && make -s -C '$work/vt/cpu' clean >/dev/null 2>&1
  make -s -j2 -C '$work/vt/cpu' CC='$cache$tsan_cc' OPT='-O1 -g -fsanitize=thread -DMG_PAR_MIN_ELEMS=1 -DMG_PAR_MIN_FLOPS=1' \
    RUNNER_OPT='-O1 -fsanitize=thread' LDFLAGS=-fsanitize=thread >/dev/null &&
  nm '$work/vt/cpu/runner' | grep -q __tsan_init &&
  for t in 1 3; do TSAN_OPTIONS='halt_on_error=1 exitcode=66' '$work/vt/cpu/runner' \
    --input input='$out/vit_tiny_input.npy' --output-dir '$work/vt/o\$t' --threads \$t >/dev/null || exit 1; done &&
  cmp '$work/vt/o1/output.npy' '$work/vt/o3/output.npy'"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
