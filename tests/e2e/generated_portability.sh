#!/bin/bash
# Generated projects on two architectures and three compilers: resnet18, vit_b_16
# and vit_tiny (torchvision, perturbed weights, opset 17) are converted once, then
# built warning-free (-std=c99 -Wall -Wextra -Werror -pedantic) with gcc and with
# clang, and those of QEMU_MODELS also with clang for aarch64-linux-gnu (run under
# qemu-aarch64: vit_b_16 takes five minutes there, so make test runs vit_tiny, the
# same code at 1/1000 of the work, and make test-zoo vit_b_16); every build must
# match PyTorch (max|err| <= 1e-4 * max|out|, cosine >= 0.99999).
# usage: tests/e2e/generated_portability.sh BUILD_DIR [MODELS [QEMU_MODELS]]
set -u
BUILD=${1:-build}
MODELS=${2:-resnet18,vit_b_16,vit_tiny}
QEMU_MODELS=${3:-resnet18,vit_tiny}
cd "$(dirname "$0")/../.."
. tests/e2e/par.sh
BUILD=$(cd "$BUILD" && pwd)
SYSROOT=/usr/aarch64-linux-gnu
if [ ! -d $SYSROOT/include ] || ! command -v qemu-aarch64 >/dev/null || ! command -v clang >/dev/null ||
   ! command -v ld.lld >/dev/null; then
  echo "missing: clang, lld, libc6-dev-arm64-cross or qemu-user (make setup installs them)"; exit 1
fi
tv=build/fixtures/tv
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models "$MODELS" --opsets 17 --modes default \
  --refs >/dev/null || { echo "export failed"; exit 1; }
work=$(mktemp -d)
# Every project compiles the same runtime sources with the same flags: ccache (when
# installed, as make setup does) compiles them once.
cache=""
if command -v ccache >/dev/null; then cache="ccache "; export CCACHE_DIR=${CCACHE_DIR:-$PWD/build/ccache}; fi
trap 'rm -rf "$work"' EXIT
pass=0 fail=0 converted=()
for model in ${MODELS//,/ }; do
  src=$work/$model
  if ! "$BUILD/migc" convert "$tv/${model}_op17_default.onnx" -o "$src" --cpu-only > "$src.log" 2>&1; then
    echo "FAIL $model: convert: $(grep -m1 error "$src.log")"; fail=$((fail + 1)); continue
  fi
  converted+=("$model")
done
# one MODEL TARGET: builds the converted project with one compiler, runs and checks it
one() {
  local model=$1 target=$2 dir=$work/${1}_$2 start res args run
  cp -r "$work/$model/cpu" "$dir"
  case $target in
    gcc) args=("CC=${cache}gcc") run=() ;;
    clang) args=("CC=${cache}clang") run=() ;;
    clang-aarch64) args=("CC=${cache}clang --target=aarch64-linux-gnu --sysroot=$SYSROOT" ARCH= "LDFLAGS=-fuse-ld=lld -static")
                   run=(qemu-aarch64 -L $SYSROOT) ;;
  esac
  if ! make -s -j"$(nproc)" -C "$dir" WERROR=-Werror "${args[@]}" > "$dir.make.log" 2>&1; then
    echo "FAIL $model $target: build: $(grep -m1 -E 'error|warning' "$dir.make.log")"; return
  fi
  start=$SECONDS
  if ! "${run[@]}" "$dir/runner" --input input="$tv/${model}_input.npy" --output-dir "$dir" > "$dir.run.log" 2>&1; then
    echo "FAIL $model $target: run: $(head -1 "$dir.run.log")"; return
  fi
  if res=$("$BUILD/tests/npycmp" "$dir/output.npy" "$tv/${model}_output.npy"); then
    echo "ok   $model $target ($((SECONDS - start)) s): $res"
  else echo "FAIL $model $target: $res"; fi
}
# as many at once as there are cores (qemu's runs are most of the time); lines in order
results=()
for model in "${converted[@]}"; do
  for target in gcc clang clang-aarch64; do
    [ $target = clang-aarch64 ] && [[ ",$QEMU_MODELS," != *",$model,"* ]] && continue
    r="$work/result_${model}_$target"; results+=("$r")
    one "$model" "$target" > "$r" 2>&1 &
    par_wait_slot
  done
done
wait
[ ${#results[@]} -gt 0 ] && cat "${results[@]}"
ran=$([ ${#results[@]} -gt 0 ] && cat "${results[@]}" | grep -c '^ok' || echo 0)
pass=$((pass + ran)) fail=$((fail + ${#results[@]} - ran))
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
