#!/bin/bash
# The C backend over the conformance folders (`migc conformance --backend c`: every
# test converted, compiled into one runner, run and compared): no failure the xfail
# list does not name, node/ at least 750 passed (issue 6), pytorch-converted and
# pytorch-operator at least 95%. simple/ is reported: its string tests
# (StringNormalizer) have no C backend yet.
# usage: tests/e2e/conformance_c.sh MIGC
set -u -o pipefail
MIGC=${1:-build/migc}
cd "$(dirname "$0")/../.."
rc=0
for spec in node:750 pytorch-converted:78 pytorch-operator:34 simple:0; do
  d=${spec%%:*} need=${spec##*:}
  out=$("$MIGC" conformance --backend c --xfail tests/conformance_xfail.txt "../shared/onnx-conformance/$d" 2>/dev/null) || rc=1
  echo "$out" | grep -E '^FAIL' | head -20
  line=$(echo "$out" | tail -1)
  passed=$(echo "$line" | sed -nE 's/^([0-9]+) passed.*/\1/p')
  printf '%-18s %s (need >= %s passed)\n' "$d" "$line" "$need"
  [ "${passed:-0}" -ge "$need" ] || rc=1
done
exit $rc
