#!/bin/bash
# The mindspore-emu backend over ONNX's node tests (issue 12 acceptance 2): every test
# converted as `migc convert --target mindspore` converts it, its net.py run through
# the strict MindSpore stand-in and compared with ONNX's outputs. At least 600 of the
# node tests pass, no failure is missing from tests/conformance_ms_xfail.txt, every
# skip (ops.Custom CPU kernels, nodes net.py cannot compute, data the runner cannot
# feed) is listed there too with its reason (and still skips), and no listed test
# passes (a stale entry).
# usage: tests/e2e/mindspore_conformance.sh MIGC
set -u -o pipefail
MIGC=${1:-build/migc}
cd "$(dirname "$0")/../.."
XFAIL=tests/conformance_ms_xfail.txt NEED=600
rc=0
start=$SECONDS
out=$("$MIGC" conformance --backend mindspore-emu --xfail "$XFAIL" ../shared/onnx-conformance/node 2>/dev/null)
st=$?
line=$(echo "$out" | tail -1)
passed=$(echo "$line" | sed -nE 's/^([0-9]+) passed.*/\1/p')
echo "$out" | grep -E '^FAIL' | head -20
[ $st -eq 0 ] || { echo "FAIL exit status $st: failures not in $XFAIL (above)"; rc=1; }
[ "${passed:-0}" -ge $NEED ] || { echo "FAIL ${passed:-0} passed, need >= $NEED"; rc=1; }
listed=$(grep -vE '^(#|$)' "$XFAIL" | awk '{print $1}' | sort)
unlisted=$(echo "$out" | sed -nE 's/^skip  ([^:]+): .*/\1/p' | sort | comm -23 - <(echo "$listed"))
[ -z "$unlisted" ] || { echo "FAIL skips not listed in $XFAIL: $(echo $unlisted | head -c 600)"; rc=1; }
# a test listed as a skip that now fails is an unexpected failure, not an expected one
skipfail=$(echo "$out" | sed -nE 's/^xfail (\S+): .*\[skip:.*/\1/p')
[ -z "$skipfail" ] || { echo "FAIL listed as skips but now failing: $skipfail"; rc=1; }
stale=$(echo "$out" | sed -nE 's/^pass  (\S+)  \(listed as xfail.*/\1/p')
stale_skip=$(echo "$out" | sed -nE 's/^pass  (\S+)$/\1/p' | sort | comm -12 - <(echo "$listed"))
[ -z "$stale$stale_skip" ] || { echo "FAIL passing tests still listed in $XFAIL: $stale $stale_skip"; rc=1; }
printf 'node: %s (need >= %s passed; %d s)\n' "$line" $NEED $((SECONDS - start))
exit $rc
