#!/bin/bash
# The ascend-emu backend over ONNX's node tests: every test prepared as the C backend
# prepares it, converted as `migc convert --target ascend` converts it (emit_ascend,
# one prefix each), all compiled with the aclnn emulator (ascend_emu/) into one runner
# and run; an `acl-emu: error` (a contract violation or a leak) fails the test. At
# least 600 of the node tests pass, no failure is missing from
# tests/conformance_ascend_xfail.txt, every skip (a node neither an aclnn call nor a
# host fallback takes, data the runner cannot feed) is listed there too with its
# reason (and still skips), and no listed test passes (a stale entry). Prints how many
# passed on aclnn calls alone and how many through a host fallback.
# ASCEND_CONF_SAMPLE=K runs every K-th test only, needing the same share of passes
# (make test takes a quarter, as CI's time allows; make test-zoo all of them).
# usage: tests/e2e/ascend_conformance.sh MIGC
set -u -o pipefail
MIGC=${1:-build/migc}
cd "$(dirname "$0")/../.."
XFAIL=tests/conformance_ascend_xfail.txt NEED=600
SAMPLE=${ASCEND_CONF_SAMPLE:-1}
rc=0
start=$SECONDS
dirs=(../shared/onnx-conformance/node)
if [ "$SAMPLE" -gt 1 ]; then
  mapfile -t all < <(find ../shared/onnx-conformance/node -mindepth 1 -maxdepth 1 -type d | sort)
  dirs=(); for i in "${!all[@]}"; do [ $((i % SAMPLE)) -eq 0 ] && dirs+=("${all[$i]}"); done
  NEED=$((600 * ${#dirs[@]} / ${#all[@]}))
  echo "every ${SAMPLE}th node test: ${#dirs[@]} of ${#all[@]}, need >= $NEED passed"
fi
out=$("$MIGC" conformance --backend ascend-emu --xfail "$XFAIL" "${dirs[@]}" 2>/dev/null)
st=$?
line=$(echo "$out" | tail -1)
split=$(echo "$out" | grep -E '^ascend-emu: ' | tail -1)
passed=$(echo "$line" | sed -nE 's/^([0-9]+) passed.*/\1/p')
echo "$out" | grep -E '^FAIL' | head -20
[ $st -eq 0 ] || { echo "FAIL exit status $st: failures not in $XFAIL (above)"; rc=1; }
[ "${passed:-0}" -ge $NEED ] || { echo "FAIL ${passed:-0} passed, need >= $NEED"; rc=1; }
[ -n "$split" ] || { echo "FAIL no 'ascend-emu: N passed on aclnn calls alone, M through a host fallback' line"; rc=1; }
listed=$(grep -vE '^(#|$)' "$XFAIL" | awk '{print $1}' | sort)
unlisted=$(echo "$out" | sed -nE 's/^skip  ([^:]+): .*/\1/p' | sort | comm -23 - <(echo "$listed"))
[ -z "$unlisted" ] || { echo "FAIL skips not listed in $XFAIL: $(echo $unlisted | head -c 600)"; rc=1; }
# a test listed as a skip that now fails is an unexpected failure, not an expected one
skipfail=$(echo "$out" | sed -nE 's/^xfail (\S+): .*\[skip:.*/\1/p')
[ -z "$skipfail" ] || { echo "FAIL listed as skips but now failing: $skipfail"; rc=1; }
# a pass prints "pass  NAME" or "pass  NAME  (host fallback: Op)"
stale=$(echo "$out" | sed -nE 's/^pass  (\S+)  .*\(listed as xfail.*/\1/p')
stale_skip=$(echo "$out" | sed -nE 's/^pass  (\S+)( .*)?$/\1/p' | sort | comm -12 - <(echo "$listed"))
[ -z "$stale$stale_skip" ] || { echo "FAIL passing tests still listed in $XFAIL: $stale $stale_skip"; rc=1; }
printf 'node: %s (need >= %s passed; %d s)\n%s\n' "$line" $NEED $((SECONDS - start)) "$split"
exit $rc
