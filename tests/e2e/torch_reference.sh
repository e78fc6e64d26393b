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

. tests/e2e/par.sh

# Each part below is one or two Python processes that import torch; they run side
# by side, each counting into its own log (tests/e2e/par.sh).
# one_model NAME SHAPE: a reference folder and its check; resnet18 at 64x64 keeps
# the float64 finite differences quick
one_model() {
  local name=$1 shape=$2 out=$work/$1
  pass=0 fail=0
  rm -rf "$out"
  if ! $PY $TOOL tests.fixtures.parity_models:$name --input-shape "$shape" --perturb --seed 3 \
       -o "$out" >"$work/$name.log" 2>&1; then
    bad "$name: torch_reference.py failed: $(tail -1 "$work/$name.log")"
  else
    ok "$name: reference folder written ($(grep -c '^wrote' "$work/$name.log") files)"
    if $PY $CHECK "$out" >"$work/$name.check" 2>&1; then ok "$name: $(tail -1 "$work/$name.check")"
    else bad "$name: $(grep -c '^FAIL' "$work/$name.check") check(s) failed"; grep '^FAIL' "$work/$name.check" | head -5; fi
  fi
  echo "COUNTS $pass $fail"
}

# two inputs (int64 tokens, float features) and two outputs: input_0/input_1, output_0/output_1
tokens_part() {
  pass=0 fail=0
  rm -rf "$work/tokens"
  if $PY $TOOL tests.fixtures.parity_models:tokens_and_features --input-shape 2x9 --input-shape 2x9x16 \
       --input-dtype int64 --input-dtype float32 --input-high 100 --perturb -o "$work/tokens" >"$work/tokens.log" 2>&1 &&
     $PY $CHECK "$work/tokens" >"$work/tokens.check" 2>&1; then ok "int + float inputs, two outputs: $(tail -1 "$work/tokens.check")"
  else bad "int + float inputs, two outputs: $(tail -1 "$work/tokens.log") $(grep '^FAIL' "$work/tokens.check" 2>/dev/null | head -3)"; fi
  echo "COUNTS $pass $fail"
}

# a TorchScript file stands in for PKG.MODULE:FACTORY (scripted: no forward hooks)
script_part() {
  pass=0 fail=0
  $PY - "$work/c1d.pt" <<'PYEOF'
import sys, torch
sys.path.insert(0, ".")
from tests.fixtures.parity_models import conv1d_gn_prelu
torch.manual_seed(0)
torch.jit.script(conv1d_gn_prelu().eval()).save(sys.argv[1])
PYEOF
  rm -rf "$work/script"
  if $PY $TOOL "$work/c1d.pt" --input-shape 2x8x32 --perturb -o "$work/script" >"$work/script.log" 2>&1 &&
     $PY $CHECK "$work/script" >"$work/script.check" 2>&1; then ok "TorchScript .pt: $(tail -1 "$work/script.check")"
  else bad "TorchScript .pt: $(tail -1 "$work/script.log") $(grep '^FAIL' "$work/script.check" 2>/dev/null | head -3)"; fi
  echo "COUNTS $pass $fail"
}

# --grad-dtype float64: gradients from a float64 copy, still checked against the same FD
lstm64_part() {
  pass=0 fail=0
  rm -rf "$work/lstm64"
  if $PY $TOOL tests.fixtures.parity_models:lstm --input-shape 2x9x16 --perturb --grad-dtype float64 \
       -o "$work/lstm64" >"$work/lstm64.log" 2>&1 && $PY $CHECK "$work/lstm64" >"$work/lstm64.check" 2>&1; then
    ok "lstm --grad-dtype float64: $(tail -1 "$work/lstm64.check")"
  else bad "lstm --grad-dtype float64: $(grep '^FAIL' "$work/lstm64.check" 2>/dev/null | head -3)"; fi
  echo "COUNTS $pass $fail"
}

# the same seed gives the same folder contents: a second conv1d_gn_prelu folder
again_part() {
  rm -rf "$work/again"
  $PY $TOOL tests.fixtures.parity_models:conv1d_gn_prelu --input-shape 2x8x32 --perturb --seed 3 -o "$work/again" >/dev/null 2>&1
  echo "COUNTS 0 0"
}

logs=()
for m in lstm:2x9x16 transformer_encoder:2x9x32 conv1d_gn_prelu:2x8x32 resnet18:1x3x64x64; do
  par_wait_slot; one_model "${m%%:*}" "${m#*:}" > "$work/part.${m%%:*}" 2>&1 & logs+=("$work/part.${m%%:*}")
done
for p in tokens_part script_part lstm64_part again_part; do
  par_wait_slot; $p > "$work/part.$p" 2>&1 & logs+=("$work/part.$p")
done
wait
par_collect "${logs[@]}"

# the same seed gave the same folder contents (ONNX files aside: torch names nodes by counter)
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

# bad input: exit 2, a one-line message, no files (each case side by side, in a folder of its own)
expect2() { # label, args...
  local label=$1 bad_dir=$work/bad.$BASHPID; shift
  pass=0 fail=0
  rm -rf "$bad_dir"
  $PY $TOOL "$@" -o "$bad_dir" >"$bad_dir.log" 2>&1; local rc=$?
  if [ $rc = 2 ] && grep -q '^torch_reference.py: error:' "$bad_dir.log" && [ ! -e "$bad_dir/ref.npz" ]; then
    ok "$label: exit 2: $(grep '^torch_reference.py: error:' "$bad_dir.log" | cut -c1-110)"
  else bad "$label: exit $rc: $(tail -1 "$bad_dir.log")"; fi
  echo "COUNTS $pass $fail"
}
logs=() n=0
bad_case() { par_wait_slot; n=$((n + 1)); expect2 "$@" > "$work/bad_case.$n" 2>&1 & logs+=("$work/bad_case.$n"); }
bad_case "missing factory" tests.fixtures.parity_models:nope --input-shape 2x9x16
bad_case "missing module" no_such_pkg.models:lstm --input-shape 2x9x16
bad_case "no colon" tests.fixtures.parity_models --input-shape 2x9x16
bad_case "missing .pt" "$work/none.pt" --input-shape 2x9x16
bad_case "wrong input shape" tests.fixtures.parity_models:lstm --input-shape 2x9x15
bad_case "malformed shape" tests.fixtures.parity_models:lstm --input-shape 2by9
bad_case "int input without --input-high" tests.fixtures.parity_models:lstm --input-shape 2x9x16 --input-dtype int64
bad_case "dtype count mismatch" tests.fixtures.parity_models:lstm --input-shape 2x9x16 --input-shape 2x9x16 \
  --input-dtype float32 --input-dtype float32 --input-dtype float32
wait
par_collect "${logs[@]}"

echo "torch_reference: $pass passed, $fail failed"
[ $fail = 0 ]
