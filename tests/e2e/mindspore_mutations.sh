#!/bin/bash
# Issue 12's harmful mutations: net.py for tests/fixtures/ms_mutants.py's model passes
# the parity check under the MindSpore stand-in (eval output against torch, and the
# moving statistics after one training-mode forward), and each of these edits of
# the emitter's output makes it fail:
#   - a padding tuple in ONNX order (t, l, b, r) instead of MindSpore's (t, b, l, r);
#   - LayerNorm's epsilon left out, so MindSpore's default 1e-7 applies (torch 1e-3);
#   - BatchNorm's momentum left as torch's 0.1 instead of 1 - 0.1;
#   - Softmax's axis dropped, so MindSpore's default -1 applies (same shape).
# usage: tests/e2e/mindspore_mutations.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$BUILD/migc PY=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/migc-msmut.XXXXXX")
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
$PY tests/fixtures/ms_mutants.py make "$work/fx" > "$work/fx.log" 2>&1 || { echo "fixture failed"; tail -3 "$work/fx.log"; exit 1; }
"$MIGC" convert "$work/fx/model_preserve.onnx" --weights "$work/fx/model.pth" --target mindspore \
  -o "$work/out" > "$work/convert.log" 2>&1
if grep -q " 0 custom ops (cpu kernel), 0 not converted" "$work/convert.log"; then ok "every node converted, none a custom op"
else bad "convert: $(grep -m2 'error\|mindspore:' "$work/convert.log")"; fi
r=$($PY tests/fixtures/ms_mutants.py check "$work/out" "$work/fx" 2>&1 | tail -1)
[[ $r == ok* ]] && ok "unmutated net.py: ${r#ok }" || bad "unmutated net.py: $r"

mutant() { # NAME SED-SCRIPT: net.py edited by SED-SCRIPT must change and must fail the check
  local name=$1 dir=$work/m_$1
  cp -r "$work/out" "$dir"
  sed -E "$2" "$work/out/mindspore/net.py" > "$dir/mindspore/net.py"
  if cmp -s "$work/out/mindspore/net.py" "$dir/mindspore/net.py"; then
    bad "$name: the edit found nothing to change in net.py"; return
  fi
  r=$($PY tests/fixtures/ms_mutants.py check "$dir" "$work/fx" 2>&1 | tail -1)
  [[ $r == FAIL* ]] && ok "$name fails: ${r#FAIL }" || bad "$name passed the parity check: $r"
}
mutant "Conv2d padding in ONNX order" 's/(Conv2d\(.*padding=\()([0-9]+), ([0-9]+), ([0-9]+), ([0-9]+)\)/\1\2, \4, \3, \5)/'
mutant "LayerNorm epsilon at MindSpore's default" 's/(LayerNorm\(.*), epsilon=[^,)]*/\1/'
mutant "BatchNorm momentum not converted" 's/(BatchNorm2d\(.*momentum=)0\.9,/\10.1,/'
mutant "Softmax axis dropped" 's/(ops\.softmax\(.*), axis=[^,)]*/\1/'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && rm -rf "$work"
[ $fail -eq 0 ]
