#!/bin/bash
# Issue 13 acceptance 5: the generated OUTDIR/ascend/CMakeLists.txt configures and
# links against a fake CANN tree of stub shared libraries (tests/fixtures/fake_cann.py)
# in each of the two library layouts (libopapi.so + libascendcl.so; libopapi_nn.so +
# libopapi_math.so + libacl_rt.so), found through ASCEND_HOME_PATH and through
# ASCEND_CUSTOM_PATH; a tree without libnnopbase.so fails to configure, naming it.
# The sources build warning-free with -std=c99 -Wall -Wextra -Werror -pedantic under
# gcc, clang and clang for aarch64 (the Ascend hosts' architecture).
# usage: tests/e2e/ascend_cmake.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$BUILD/migc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
for s in tiny_cnn tiny_cnn_preserve; do
  "$MIGC" convert samples/$s.onnx --weights samples/tiny_cnn.pth --target ascend --input-shape input=1x3x32x32 \
    --strict -o "$work/$s" > "$work/$s.log" 2>&1 ||
    { bad "$s: convert --target ascend: $(tail -2 "$work/$s.log")"; continue; }
  A=$work/$s/ascend
  for layout in legacy split; do
    root=$work/cann_${s}_$layout
    /usr/bin/python3 tests/fixtures/fake_cann.py "$A/acl_decls.h" "$root" $layout > "$work/fake.log" 2>&1 ||
      { bad "$s: fake CANN tree ($layout): $(tail -2 "$work/fake.log")"; continue; }
    for var in ASCEND_HOME_PATH ASCEND_CUSTOM_PATH; do
      b=$work/b_${s}_${layout}_$var
      if env -u ASCEND_HOME_PATH -u ASCEND_CUSTOM_PATH $var="$root" cmake -S "$A" -B "$b" > "$b.log" 2>&1 &&
         cmake --build "$b" > "$b.build.log" 2>&1 && [ -x "$b/runner" ]; then
        # the linker drops a library nothing is taken from (--as-needed): the configure
        # step shows what was found, the runner what it needs
        found=$(sed -nE 's/^-- aclnn: (.*)/\1/p' "$b.log" | tr ' ;' '\n\n' | sed -E 's|.*/||' | sort | tr '\n' ' ')
        needed=$(readelf -d "$b/runner" | sed -nE 's/.*Shared library: \[(lib[a-z_]+)\.so\].*/\1/p' | sort | tr '\n' ' ')
        case $layout in
          legacy) want_found="libascendcl.so libnnopbase.so libopapi.so "; want_needed="libascendcl libnnopbase libopapi" ;;
          split) want_found="libacl_rt.so libnnopbase.so libopapi_math.so libopapi_nn.so "
                 want_needed="libacl_rt libnnopbase libopapi_nn" ;;
        esac
        miss=""
        for l in $want_needed; do [[ " $needed " == *" $l "* ]] || miss="$miss $l"; done
        [ "$found" = "$want_found" ] && [ -z "$miss" ] &&
          ok "$s: $layout layout through $var: configures ($found), links (needs ${needed% })" ||
          bad "$s: $layout layout through $var: found '$found' (want '$want_found'), needs '$needed' (missing:$miss)"
      else bad "$s: $layout layout through $var: $(grep -hE 'Error|error' "$b.log" "$b.build.log" 2>/dev/null | head -3)"; fi
    done
  done
  # a tree without libnnopbase.so: configure fails and says which library is missing
  root=$work/cann_${s}_legacy
  rm -f "$root/lib64/libnnopbase.so"
  if ! env -u ASCEND_CUSTOM_PATH ASCEND_HOME_PATH="$root" cmake -S "$A" -B "$work/b_missing_$s" > "$work/missing.log" 2>&1 &&
     grep -q "no libnnopbase.so under $root" "$work/missing.log"; then
    ok "$s: a CANN tree without libnnopbase.so fails to configure, naming it"
  else bad "$s: missing libnnopbase.so: $(tail -3 "$work/missing.log")"; fi
  # warning-free C99 under gcc, clang and clang for aarch64
  for cc in gcc clang "clang --target=aarch64-linux-gnu --sysroot=/usr/aarch64-linux-gnu"; do
    okc=1
    for f in model.c models.c main.c runtime/common.c; do
      $cc -std=c99 -Wall -Wextra -Werror -pedantic -O2 -I"$A" -I"$A/runtime" -c "$A/$f" -o "$work/x.o" 2> "$work/cc.log" ||
        { okc=0; bad "$s: $f under $cc: $(head -3 "$work/cc.log")"; break; }
    done
    [ $okc = 1 ] && ok "$s: the sources build warning-free with $cc -std=c99 -Wall -Wextra -Werror -pedantic"
  done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
