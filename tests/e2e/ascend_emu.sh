#!/bin/bash
# The strict aclnn emulator (ascend_emu/, docs/ascend-emulator.md): every fixture in
# tests/fixtures/ascend_emu/ compiled with gcc and clang (-std=c99 -pedantic -Wall
# -Wextra -Werror) against the emulator; ok_*.c programs must exit 0 with no violation
# or leak and print what ref.py computes independently (torch/numpy); bad_*.c programs
# make one mistake each, which must be reported naming the function and the argument
# (the fixture's "EXPECT:" line) with a non-zero exit status.
# usage: tests/e2e/ascend_emu.sh
set -u
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
FLAGS="-std=c99 -pedantic -Wall -Wextra -Werror"
FIX=tests/fixtures/ascend_emu
PY=/usr/bin/python3

# the emulator as a generated project builds it: files copied into emu/, nothing else
mkdir -p "$work/proj/emu"
cp ascend_emu/*.c ascend_emu/*.h "$work/proj/emu/"
for cc in gcc clang; do
  mkdir -p "$work/$cc"
  okc=1
  for f in "$work"/proj/emu/*.c; do
    $cc $FLAGS -I"$work/proj/emu" -c "$f" -o "$work/$cc/$(basename "$f" .c).o" 2>> "$work/$cc/emu.log" || okc=0
  done
  [ $okc = 1 ] && ok "emulator compiles warning-free with $cc $FLAGS" ||
    bad "emulator under $cc: $(head -5 "$work/$cc/emu.log")"
done
# the project line of a generated program: cc -std=c99 -I. -Iemu main.c model.c emu/*.c -lm
cp "$FIX/ok_conv_relu.c" "$work/proj/main.c"
cp "$FIX/emu_test.h" "$work/proj/"
printf '/* model.c stand-in */\nint model_stub(void);\nint model_stub(void) { return 0; }\n' > "$work/proj/model.c"
(cd "$work/proj" && cc -std=c99 -I. -Iemu main.c model.c emu/*.c -lm -o prog 2> cc.log) &&
  ok "a generated project's build line (cc -std=c99 -I. -Iemu main.c model.c emu/*.c -lm) links" ||
  bad "generated project build: $(head -5 "$work/proj/cc.log")"

# ---- fixtures ------------------------------------------------------------------
run_fixture() { # cc file -> sets rc, out, err
  local cc=$1 f=$2 name
  name=$(basename "$f" .c)
  exe="$work/$cc/$name"
  if ! $cc $FLAGS -Iascend_emu -I$FIX "$f" "$work/$cc"/emu_*.o -lm -o "$exe" 2> "$exe.cc"; then
    rc=255; return
  fi
  timeout 20 "$exe" > "$exe.out" 2> "$exe.err"
  rc=$?
}

outs=()
for cc in gcc clang; do
  for f in $FIX/ok_*.c; do
    name=$(basename "$f" .c)
    run_fixture $cc "$f"
    if [ $rc = 255 ]; then bad "$cc: $name does not compile: $(head -3 "$exe.cc")"; continue; fi
    if [ $rc = 0 ] && grep -q '^acl-emu: 0 contract violations, 0 leaks$' "$exe.err"; then
      ok "$cc: $name runs clean (aclFinalize 0, no violation, no leak)"
    else
      bad "$cc: $name exit $rc: $(grep -v '^$' "$exe.err" | head -5)"
    fi
    outs+=("$exe.out")
  done
  for f in $FIX/bad_*.c; do
    name=$(basename "$f" .c)
    want=$(sed -n 's/.*EXPECT: \(.*\)$/\1/p' "$f" | head -1)
    run_fixture $cc "$f"
    if [ $rc = 255 ]; then bad "$cc: $name does not compile: $(head -3 "$exe.cc")"; continue; fi
    if [ $rc != 0 ] && grep -qF -- "$want" "$exe.err"; then
      ok "$cc: $name: exit $rc, reported \"$want\""
    else
      bad "$cc: $name: exit $rc, expected \"$want\" in: $(head -5 "$exe.err")"
    fi
  done
done

# ---- values against the independent reference -----------------------------------
if [ ${#outs[@]} -gt 0 ]; then
  $PY $FIX/ref.py "${outs[@]}" > "$work/ref.log" 2>&1
  while IFS= read -r line; do
    case "$line" in
      "ok   "*) ok "${line#ok   }" ;;
      "FAIL "*) bad "${line#FAIL }" ;;
      *) echo "$line" ;;
    esac
  done < "$work/ref.log"
  grep -q '^\(ok   \|FAIL \)' "$work/ref.log" || bad "ref.py printed no result: $(tail -3 "$work/ref.log")"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
