#!/bin/bash
# One meaning of "supported" (issue 11): for every model of the torchvision zoo
# (both export styles) and every conformance model, with and without
# --input-shape, the CPU and MindSpore converted counts `migc coverage` reports
# equal what `migc convert --target cpu,mindspore` converts, and its MindSpore
# custom ops (ops.Custom CPU kernels) are the nodes convert made custom ops of
# (tests/fixtures/coverage_agreement.py), also on a model built to have them.
# The zoo is exported once into build/fixtures/tv (shared with the other suites);
# make test takes ZOO_TEST, make test-zoo the whole zoo (tests/e2e/zoo_lists.sh).
# usage: tests/e2e/coverage_agreement.sh BUILD_DIR
set -u -o pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$BUILD/migc
. tests/e2e/zoo_lists.sh
ZOO=${MIGC_ZOO:-$ZOO_TEST}
tv=build/fixtures/tv
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models "$ZOO" --opsets 17 --modes default,preserve \
  > /dev/null 2>&1 || { echo "zoo export failed"; exit 1; }
zoo=()
for m in ${ZOO//,/ }; do zoo+=("$tv/${m}_op17_default.onnx" "$tv/${m}_op17_preserve.onnx"); done
mapfile -t conf < <(find ../shared/onnx-conformance -name '*.onnx' | sort)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
check() { # name command...
  local name=$1; shift
  if "$@" > "$work/last.log" 2>&1; then echo "ok   $name: $(tail -1 "$work/last.log")"; pass=$((pass + 1))
  else echo "FAIL $name"; grep FAIL "$work/last.log" | head -10 | sed 's/^/     /'; tail -1 "$work/last.log"; fail=$((fail + 1)); fi
}
A="/usr/bin/python3 tests/fixtures/coverage_agreement.py $MIGC $work"
check "zoo, both export styles" $A "${zoo[@]}"
check "zoo, with --input-shape" $A --input-shape-from-model "${zoo[@]}"
check "conformance models" $A "${conf[@]}"
# --input-shape restates a conformance model's own static shapes: every fourth model
# keeps that path checked at a quarter of the cost
conf4=(); for i in "${!conf[@]}"; do [ $((i % 4)) -eq 0 ] && conf4+=("${conf[$i]}"); done
check "conformance models (every fourth), with --input-shape" $A --input-shape-from-model "${conf4[@]}"
# the check can fail: a count that is one off, for either target, is caught, and
# so is a custom op coverage does not list (a model whose ops have no MindSpore rule)
/usr/bin/python3 tests/fixtures/make_custom_models.py build/fixtures/custom || { echo "fixture failed"; exit 1; }
check "ops with no MindSpore rule (custom ops)" $A build/fixtures/custom/custom_ops.onnx build/fixtures/custom/custom_param.onnx
/usr/bin/python3 - "$MIGC" "$work" > /dev/null <<'PY' && pass=$((pass + 1)) || { echo "FAIL the agreement check cannot fail (custom ops)"; fail=$((fail + 1)); }
import json, subprocess, sys
sys.path.insert(0, "tests/fixtures")
import coverage_agreement as ca
real = subprocess.run
def lying(args, **kw):
    out = real(args, **kw)
    if "coverage" in args:
        j = json.loads(out.stdout)
        for m in j["models"]:
            m["targets"]["mindspore"]["custom_op_nodes"] = m["targets"]["mindspore"]["custom_op_nodes"][1:]
        out.stdout = json.dumps(j)
    return out
subprocess.run = lying
sys.argv = ["x", sys.argv[1], sys.argv[2], "build/fixtures/custom/custom_ops.onnx"]
sys.exit(0 if ca.main() == 1 else 1)
PY
for t in cpu mindspore; do
/usr/bin/python3 - "$MIGC" "$work" "$t" > /dev/null <<'PY' && pass=$((pass + 1)) || { echo "FAIL the agreement check cannot fail ($t)"; fail=$((fail + 1)); }
import json, subprocess, sys, os
sys.path.insert(0, "tests/fixtures")
import coverage_agreement as ca
real = subprocess.run
def lying(args, **kw):
    out = real(args, **kw)
    if "coverage" in args:
        j = json.loads(out.stdout)
        for m in j["models"]:
            m["targets"][target]["converted_nodes"] -= 1
        out.stdout = json.dumps(j)
    return out
subprocess.run = lying
target = sys.argv[3]
sys.argv = ["x", sys.argv[1], sys.argv[2], "samples/tiny_cnn_preserve.onnx"]
sys.exit(0 if ca.main() == 1 else 1)
PY
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
