#!/bin/bash
# Hostile inputs (issue 16), one class per section, each from files crafted here:
# every one must give exit 2 within 10 s and a one-line diagnostic naming the file
# and the problem, read nothing outside what it was given (a canary file's text
# must appear in no output), and change no existing file.
#   XML: the rules (coverage --rules), the naming rules (weights --rules) and a
#        parity policy (unit test test_parity) with a DTD: quadratic and
#        exponential entity expansion, an external entity naming the canary.
# usage: tests/e2e/hostile_inputs.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$(realpath "$BUILD/migc")
work=$(mktemp -d "${TMPDIR:-/tmp}/migc-hostile.XXXXXX")
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
canary="CANARY-$$-$RANDOM"
echo "$canary" > "$work/canary.txt"

# expect_refused NAME FILE PATTERN CMD...: exit 2 in 10 s, one error line naming FILE
# and matching PATTERN, the canary nowhere in stdout, stderr or written files
expect_refused() {
  local name=$1 file=$2 pat=$3; shift 3
  local out="$work/$name.out" err="$work/$name.err" start=$SECONDS rc
  timeout 10 "$@" > "$out" 2> "$err"; rc=$?
  local errs; errs=$(grep -c "error" "$err")
  if [ $rc -ne 2 ]; then bad "$name: exit $rc, want 2 ($(tail -1 "$err"))"
  elif [ "$errs" -ne 1 ] || ! grep "error" "$err" | grep -q "$file.*$pat"; then
    bad "$name: want one error naming $file and '$pat', got: $(head -3 "$err")"
  elif grep -rqs "$canary" "$out" "$err" "$work/outputs"; then bad "$name: the canary's text was read"
  else ok "$name (exit 2 in $((SECONDS - start)) s)"; fi
}

# --- XML with a DTD
laughs() { # the exponential form: 10 levels of 10 references
  echo '<?xml version="1.0"?>'
  printf '<!DOCTYPE %s [\n <!ENTITY l0 "lol">\n' "$1"
  for i in 1 2 3 4 5 6 7 8 9; do
    printf ' <!ENTITY l%d "' $i; for _ in 1 2 3 4 5 6 7 8 9 10; do printf '&l%d;' $((i - 1)); done; echo '">'
  done
  echo ']>'
}
quadratic() { # one 100 KB entity referenced 100000 times
  echo '<?xml version="1.0"?>'
  printf '<!DOCTYPE %s [<!ENTITY a "%s">]>\n' "$1" "$(head -c 100000 /dev/zero | tr '\0' a)"
}
mkdir -p "$work/outputs"
{ laughs rules; echo '<rules target="mindspore" version="1"><rule op="Relu" opset="1-"><call api="&l9;"/></rule></rules>'; } > "$work/laughs_rules.xml"
{ quadratic rules; printf '<rules target="mindspore" version="1"><!-- %s --></rules>\n' "$(for _ in $(seq 1000); do printf '&a;'; done)"; } > "$work/quad_rules.xml"
{ echo '<?xml version="1.0"?>'; echo "<!DOCTYPE rules [<!ENTITY x SYSTEM \"file://$work/canary.txt\">]>";
  echo '<rules target="mindspore" version="1"><rule op="Relu" opset="1-"><call api="&x;" kind="function"/></rule></rules>'; } > "$work/xxe_rules.xml"
{ laughs naming; echo '<naming><rename match="&l9;" replace="x"/></naming>'; } > "$work/laughs_naming.xml"
{ echo '<?xml version="1.0"?>'; echo "<!DOCTYPE naming [<!ENTITY x SYSTEM \"file://$work/canary.txt\">]>";
  echo '<naming><rename match="&x;" replace="x"/></naming>'; } > "$work/xxe_naming.xml"
model=samples/tiny_cnn.onnx
for f in laughs_rules quad_rules xxe_rules; do
  expect_refused "coverage --rules $f" "$f.xml" "DOCTYPE is not accepted" \
    "$MIGC" coverage "$model" --rules "$work/$f.xml" -o "$work/outputs/$f.md"
done
for f in laughs_naming xxe_naming; do
  expect_refused "weights --rules $f" "$f.xml" "DOCTYPE is not accepted" \
    "$MIGC" weights "$model" --rules "$work/$f.xml" -o "$work/outputs/$f.ckpt"
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && rm -rf "$work"
[ $fail -eq 0 ]
