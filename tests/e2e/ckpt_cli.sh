#!/bin/sh
# tests/e2e/ckpt_cli.sh MIGC DIR: `migc ckpt dump` and `migc ckpt diff` exit codes
# and output on the checkpoints test_ckpt leaves in DIR (all.ckpt, all_crc.ckpt,
# near.ckpt, other.ckpt; see tests/unit/test_ckpt.c). Prints 'N passed, N failed'.
set -u
MIGC=$1
D=$2
pass=0
fail=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# expect WANT_RC [grep PATTERN] -- CMD...: runs CMD, checks its exit status and,
# when a pattern is given, that its stdout+stderr contain it.
expect() {
  want=$1; shift
  pat=
  if [ "$1" = grep ]; then pat=$2; shift 2; fi
  shift # --
  "$@" >"$TMP/out" 2>&1
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL (exit $rc, want $want): $*"; sed 's/^/  | /' "$TMP/out" | head -20; fail=$((fail + 1)); return
  fi
  if [ -n "$pat" ] && ! grep -q -e "$pat" "$TMP/out"; then
    echo "FAIL (no '$pat' in output): $*"; sed 's/^/  | /' "$TMP/out" | head -20; fail=$((fail + 1)); return
  fi
  pass=$((pass + 1))
}

expect 0 grep 'usage: migc ckpt' -- "$MIGC" ckpt --help
expect 0 grep 'usage: migc ckpt' -- "$MIGC" ckpt dump --help
expect 0 grep 'usage: migc ckpt' -- "$MIGC" ckpt diff --help
expect 2 -- "$MIGC" ckpt
expect 2 -- "$MIGC" ckpt frob "$D/all.ckpt"
expect 2 -- "$MIGC" ckpt dump
expect 2 -- "$MIGC" ckpt dump "$D/all.ckpt" --bogus
expect 2 -- "$MIGC" ckpt diff "$D/all.ckpt"
expect 2 grep 'non-negative' -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/near.ckpt" --atol -1
expect 2 grep 'non-negative' -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/near.ckpt" --rtol x

# dump: one line per tensor, split tensors joined, the CRC trailer verified
expect 0 grep 'split.even  Float32  \[10, 25\]  1000 bytes' -- "$MIGC" ckpt dump "$D/all.ckpt"
expect 0 grep '18 tensors in 31 values.*CRC trailer: none' -- "$MIGC" ckpt dump "$D/all.ckpt"
expect 0 grep 'CRC trailer: verified' -- "$MIGC" ckpt dump "$D/all_crc.ckpt"
expect 0 grep '"crc_trailer": true' -- "$MIGC" ckpt dump --json "$D/all_crc.ckpt"
expect 2 grep 'cannot open' -- "$MIGC" ckpt dump "$D/missing.ckpt"
cp "$D/all_crc.ckpt" "$TMP/bad.ckpt"
printf 'X' | dd of="$TMP/bad.ckpt" bs=1 seek=100 conv=notrunc 2>/dev/null
expect 2 grep 'CRC mismatch' -- "$MIGC" ckpt dump "$TMP/bad.ckpt"
head -c 500 "$D/all.ckpt" >"$TMP/cut.ckpt"
expect 2 grep 'error' -- "$MIGC" ckpt dump "$TMP/cut.ckpt"
: >"$TMP/empty.ckpt"
expect 2 grep 'empty' -- "$MIGC" ckpt dump "$TMP/empty.ckpt"

# dump agrees with binascii.crc32 over the same tensors (decode_ckpt.py's decoder)
if [ -x /usr/bin/python3 ]; then
  "$MIGC" ckpt dump --json "$D/all_crc.ckpt" >"$TMP/dump.json"
  expect 0 -- /usr/bin/python3 -c '
import json, sys, binascii, importlib.util
spec = importlib.util.spec_from_file_location("dc", sys.argv[1]); dc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dc)
_, got = dc.decode(sys.argv[2]); dump = json.load(open(sys.argv[3]))
rows = {t["tag"]: t for t in dump["tensors"]}
assert list(rows) == list(got), (list(rows), list(got))
for tag, g in got.items():
    r = rows[tag]
    assert r["dtype"] == g["type"] and r["shape"] == g["dims"] and r["bytes"] == len(g["content"]), tag
    assert r["crc32"] == "%08x" % binascii.crc32(g["content"]), tag
' "$(dirname "$0")/../fixtures/decode_ckpt.py" "$D/all_crc.ckpt" "$TMP/dump.json"
fi

# diff: equal (with and without CRC; near.ckpt is unsplit), within and beyond tolerance
expect 0 grep '18 equal, 0 differ' -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/all_crc.ckpt"
expect 0 -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/all.ckpt"
expect 1 grep 'values differ: t.Float32: 1 of 12' -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/near.ckpt"
expect 0 -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/near.ckpt" --atol 1e-2
expect 0 -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/near.ckpt" --rtol 1e-2
expect 1 -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/near.ckpt" --rtol 1e-4
expect 1 grep 'only in A: t.Int8' -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/other.ckpt"
expect 1 grep 'only in B: extra' -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/other.ckpt"
expect 1 grep 'shape differs: t.UInt8: \[3, 4\] vs \[4, 3\]' -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/other.ckpt"
expect 1 grep 'dtype differs: t.Bool: Bool vs UInt8' -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/other.ckpt"
expect 1 grep 'values differ: split.even: 1 of 250' -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/other.ckpt"
expect 1 grep '12 equal, 5 differ; 1 only in A, 1 only in B' -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/other.ckpt"
expect 1 grep '13 equal, 4 differ; 1 only in A, 1 only in B' -- "$MIGC" ckpt diff "$D/all.ckpt" "$D/other.ckpt" --atol 1
expect 2 -- "$MIGC" ckpt diff "$D/all.ckpt" "$TMP/bad.ckpt"
expect 2 -- "$MIGC" ckpt diff "$D/missing.ckpt" "$D/all.ckpt"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
