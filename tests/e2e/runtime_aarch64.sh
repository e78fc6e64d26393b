#!/bin/bash
# Cross-builds the CPU runtime and its unit tests for aarch64 with clang (as strict
# C99: -std=c99 -Wall -Wextra -Werror -pedantic) and runs them under qemu-user.
# Needs Debian's libc6-dev-arm64-cross, libgcc-12-dev-arm64-cross, lld and
# qemu-user, which make setup installs; fails
# where they are missing. cmocka is not installed for arm64, so the tests compile
# against tests/unit/cmocka_lite/cmocka.h.
set -u
cd "$(dirname "$0")/../.."
SYSROOT=/usr/aarch64-linux-gnu
if [ ! -d $SYSROOT/include ] || ! command -v qemu-aarch64 >/dev/null || ! command -v clang >/dev/null ||
   ! command -v ld.lld >/dev/null || ! ls /usr/lib/gcc-cross/aarch64-linux-gnu/*/libgcc.a >/dev/null 2>&1; then
  echo "missing: clang, lld, libc6-dev-arm64-cross, libgcc-12-dev-arm64-cross or qemu-user (make setup installs them)"; exit 1
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
FLAGS="--target=aarch64-linux-gnu --sysroot=$SYSROOT -std=c99 -Wall -Wextra -Werror -pedantic -O2"
# neon: the aarch64 path as shipped; small: NEON with tiny cache blocks (every block
# edge); portable: the plain C path as aarch64 compiles it. The three build and run
# side by side (most of the time is qemu), and report in order.
variant() {
  local variant=$1 extra=""
  [ $variant = small ] && extra="-DMG_SGEMM_MC=16 -DMG_SGEMM_KC=16 -DMG_SGEMM_NC=48"
  [ $variant = portable ] && extra="-DMG_RUNTIME_PORTABLE"
  # Linked statically with lld: the GNU cross linker is another package
  # (binutils-aarch64-linux-gnu), and lld with --sysroot misreads the absolute paths
  # in the sysroot's libc.so linker script. Linking needs libgcc-12-dev-arm64-cross.
  clang $FLAGS $extra -fuse-ld=lld -static -Iruntime -Itests/unit/cmocka_lite \
    tests/unit/test_runtime.c runtime/*.c -lm -o "$OUT/test_runtime_$variant" &&
    qemu-aarch64 -L $SYSROOT "$OUT/test_runtime_$variant"
}
pids=()
for v in neon small portable; do variant $v > "$OUT/$v.log" 2>&1 & pids+=($!); done
rc=0 i=0
for v in neon small portable; do
  wait "${pids[$i]}" || rc=1
  i=$((i + 1))
  echo "== aarch64 test_runtime ($v)"
  grep -v '^\[       OK' "$OUT/$v.log"
done
exit $rc
