#!/bin/bash
# tools/torch_reference.py end to end: writes reference folders for the parity
# models (lstm, transformer_encoder, conv1d_gn_prelu, resnet18, and a TorchScript
# file) and checks each with tests/fixtures/check_reference.py: every file and
# npz member with the right shapes, ONNX exports that pass onnx.checker with the
# contract's names, outputs recomputed from model.pth, gradients against float64
# finite differences. Then: the checker catches a gradient off by 1%; bad
# factories, shapes and dtypes exit 2 and leave no files.
# usage: tests/e2e/torch_reference.sh [WORKDIR]   (default: a fresh temp dir)
set -u
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
TOOL=tools/torch_reference.py
CHECK=tests/fixtures/check_reference.py
work=${1:-$(mktemp -d)}
mkdir -p "$work"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# name, input shape; resnet18 at 64x64 keeps the float64 finite differences quick
models="lstm:2x9x16 transformer_encoder:2x9x32 conv1d_gn_prelu:2x8x32 resnet18:1x3x64x64"
for m in $models; do
  name=${m%%:*} shape=${m#*:} out=$work/$name
  rm -rf "$out"
  if ! $PY $TOOL tests.fixtures.parity_models:$name --input-shape "$shape" --perturb --seed 3 \
       -o "$out" >"$work/$name.log" 2>&1; then
    bad "$name: torch_reference.py failed: $(tail -1 "$work/$name.log")"; continue
  fi
  ok "$name: reference folder written ($(grep -c '^wrote' "$work/$name.log") files)"
  if $PY $CHECK "$out" >"$work/$name.check" 2>&1; then ok "$name: $(tail -1 "$work/$name.check")"
  else bad "$name: $(grep -c '^FAIL' "$work/$name.check") check(s) failed"; grep '^FAIL' "$work/$name.check" | head -5; fi
done

# two inputs (int64 tokens, float features) and two outputs: input_0/input_1, output_0/output_1
rm -rf "$work/tokens"
if $PY $TOOL tests.fixtures.parity_models:tokens_and_features --input-shape 2x9 --input-shape 2x9x16 \
     --input-dtype int64 --input-dtype float32 --input-high 100 --perturb -o "$work/tokens" >"$work/tokens.log" 2>&1 &&
   $PY $CHECK "$work/tokens" >"$work/tokens.check" 2>&1; then ok "int + float inputs, two outputs: $(tail -1 "$work/tokens.check")"
else bad "int + float inputs, two outputs: $(tail -1 "$work/tokens.log") $(grep '^FAIL' "$work/tokens.check" 2>/dev/null | head -3)"; fi

# a TorchScript file stands in for PKG.MODULE:FACTORY (scripted: no forward hooks)
$PY - "$work/c1d.pt" <<'EOF'
import sys, torch
sys.path.insert(0, ".")
from tests.fixtures.parity_models import conv1d_gn_prelu
torch.manual_seed(0)
torch.jit.script(conv1d_gn_prelu().eval()).save(sys.argv[1])
EOF
rm -rf "$work/script"
if $PY $TOOL "$work/c1d.pt" --input-shape 2x8x32 --perturb -o "$work/script" >"$work/script.log" 2>&1 &&
   $PY $CHECK "$work/script" >"$work/script.check" 2>&1; then ok "TorchScript .pt: $(tail -1 "$work/script.check")"
else bad "TorchScript .pt: $(tail -1 "$work/script.log") $(grep '^FAIL' "$work/script.check" 2>/dev/null | head -3)"; fi

# --grad-dtype float64: gradients from a float64 copy, still checked against the same FD
rm -rf "$work/lstm64"
if $PY $TOOL tests.fixtures.parity_models:lstm --input-shape 2x9x16 --perturb --grad-dtype float64 \
     -o "$work/lstm64" >"$work/lstm64.log" 2>&1 && $PY $CHECK "$work/lstm64" >"$work/lstm64.check" 2>&1; then
  ok "lstm --grad-dtype float64: $(tail -1 "$work/lstm64.check")"
else bad "lstm --grad-dtype float64: $(grep '^FAIL' "$work/lstm64.check" 2>/dev/null | head -3)"; fi

# the same seed gives the same folder contents (ONNX files aside: torch names nodes by counter)
rm -rf "$work/again"
$PY $TOOL tests.fixtures.parity_models:conv1d_gn_prelu --input-shape 2x8x32 --perturb --seed 3 -o "$work/again" >/dev/null 2>&1
if $PY - "$work/conv1d_gn_prelu/ref.npz" "$work/again/ref.npz" <<'EOF'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
sys.exit(0 if a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files) else 1)
EOF
then ok "same --seed, same ref.npz"; else bad "same --seed gave a different ref.npz"; fi

# the checker must notice one parameter gradient off by 1%
if [ -d "$work/lstm" ]; then
  rm -rf "$work/broken"; cp -r "$work/lstm" "$work/broken"
  $PY - "$work/broken/ref.npz" <<'EOF'
import sys, numpy as np
z = dict(np.load(sys.argv[1]))
z["grads/params/lstm.weight_hh_l1"] = z["grads/params/lstm.weight_hh_l1"] * np.float32(1.01)
with open(sys.argv[1], "wb") as f:
    np.savez(f, **z)
EOF
  $PY $CHECK "$work/broken" >"$work/broken.check" 2>&1; rc=$?
  if [ $rc = 1 ] && grep -q '^FAIL grad lstm.weight_hh_l1' "$work/broken.check"; then
    ok "checker fails a gradient scaled by 1.01 (exit 1, names lstm.weight_hh_l1)"
  else bad "checker missed a gradient scaled by 1.01 (exit $rc)"; fi
fi

# bad input: exit 2, a one-line message, no files
expect2() { # label, args...
  local label=$1; shift
  rm -rf "$work/bad"
  $PY $TOOL "$@" -o "$work/bad" >"$work/bad.log" 2>&1; local rc=$?
  if [ $rc = 2 ] && grep -q '^torch_reference.py: error:' "$work/bad.log" && [ ! -e "$work/bad/ref.npz" ]; then
    ok "$label: exit 2: $(grep '^torch_reference.py: error:' "$work/bad.log" | cut -c1-110)"
  else bad "$label: exit $rc: $(tail -1 "$work/bad.log")"; fi
}
expect2 "missing factory" tests.fixtures.parity_models:nope --input-shape 2x9x16
expect2 "missing module" no_such_pkg.models:lstm --input-shape 2x9x16
expect2 "no colon" tests.fixtures.parity_models --input-shape 2x9x16
expect2 "missing .pt" "$work/none.pt" --input-shape 2x9x16
expect2 "wrong input shape" tests.fixtures.parity_models:lstm --input-shape 2x9x15
expect2 "malformed shape" tests.fixtures.parity_models:lstm --input-shape 2by9
expect2 "int input without --input-high" tests.fixtures.parity_models:lstm --input-shape 2x9x16 --input-dtype int64
expect2 "dtype count mismatch" tests.fixtures.parity_models:lstm --input-shape 2x9x16 --input-shape 2x9x16 \
  --input-dtype float32 --input-dtype float32 --input-dtype float32

echo "torch_reference: $pass passed, $fail failed"
[ $fail = 0 ]
