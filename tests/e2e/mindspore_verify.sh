#!/bin/bash
# `migc verify DIR --backend mindspore-emu [--grad]` (issue 12, acceptance 1): the
# converted MindSpore net (mindspore/net.py + model.ckpt) under the MindSpore stand-in
# against tools/torch_reference.py folders, with verify's verdicts, tolerances and
# exit codes: resnet18 (64x64), mobilenet_v2 (96x96), lstm (one nn.LSTM of two
# layers), transformer_encoder, conv1d_gn_prelu (nn.Conv1d), tokens_and_features and
# relpos (a swin-style bias table gathered by an index buffer) pass forward and
# gradients (parameters matched to torch's by checkpoint tag through the weight
# map), the small ones in both export styles; relpos with two gather indices
# swapped fails. An OUTDIR of `migc convert --target mindspore` passes, and fails
# (exit 1) with a checkpoint tensor scaled by 1% or a net.py whose gradient is
# wrong but whose forward is not (one skip connection detached, one ReLU's gradient
# doubled; the stem conv detached, so one parameter has no gradient: an error row);
# an ops.Custom kernel (topk_mlp) runs forward and makes the gradients an error row
# naming it; bad usage exits 2. Reference folders are cached in build/fixtures/ms_verify.
# usage: tests/e2e/mindspore_verify.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
BUILD=$(cd "$BUILD" && pwd)
MIGC=$BUILD/migc PY=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/migc-msverify.XXXXXX")
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
jq_py() { # FILE PYTHON-EXPR (j is the parsed JSON; the expression must be true)
  $PY -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}

# --- reference folders (cached in build/fixtures/ms_verify; shared with ascend_parity.sh) ---
. tests/e2e/small_refs.sh
small_refs_ensure || exit 1
fx=$small_refs

# --- reference folders: converted with their model.pth, forward and gradients ---
passes() { # NAME: verify --grad passes, with parameter gradients and nothing unmapped
  local m=$1
  "$MIGC" verify "$fx/$m" --backend mindspore-emu --grad --json "$work/$m.json" > "$work/$m.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && jq_py "$work/$m.json" \
       "j['backend']=='mindspore-emu' and j['verdict']=='pass' and len(j['gradients']['params'])>0 and j['gradients']['unmapped']==[]"; then
    ok "$m: $(jq_py "$work/$m.json" "print(len(j['outputs']), 'outputs,', len(j['gradients']['params']), 'parameter gradients,', len(j['gradients']['inputs']), 'input gradients') or True") match torch ($(grep '^verify:' "$work/$m.log"))"
  else bad "$m (exit $rc): $(grep -E 'FAIL|ERROR|error' "$work/$m.log" | head -3 | cut -c1-300)"; fi
}
for m in resnet18 mobilenet_v2 lstm transformer_encoder conv1d_gn_prelu tokens_and_features relpos; do passes $m; done
# the default export of each small model (verify takes model_preserve.onnx when there
# is one): LSTM gates folded into the initializers, a GroupNorm's affine Unsqueeze
# folded, relpos's table[index] folded into one constant
passes_default() { # NAME
  local m=$1 dir=$work/default_$1
  "$MIGC" convert "$fx/$m/model.onnx" --weights "$fx/$m/model.pth" --target mindspore -o "$dir" > "$work/$m.d.convert" 2>&1 &&
    "$MIGC" verify "$dir" --reference "$fx/$m/ref.npz" --backend mindspore-emu --grad --json "$work/$m.d.json" \
      > "$work/$m.d.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && jq_py "$work/$m.d.json" "j['verdict']=='pass' and len(j['gradients']['params'])>0 and j['gradients']['unmapped']==[]"; then
    ok "$m (default export): forward and $(jq_py "$work/$m.d.json" "print(len(j['gradients']['params']), end='') or True") parameter gradients match torch ($(grep '^verify:' "$work/$m.d.log"))"
  else bad "$m (default export, exit $rc): $(grep -hE 'FAIL|ERROR|error' "$work/$m.d.convert" "$work/$m.d.log" | head -3 | cut -c1-300)"; fi
}
for m in lstm transformer_encoder conv1d_gn_prelu tokens_and_features relpos; do passes_default $m; done
# relpos: the table is read through a gather of its flat elements, and the index buffer
# the graph no longer reads is held; two of the gather's indices swapped must fail
if grep -q "mindspore.ops.gather(mindspore.ops.reshape(self.table, (-1,)), " "$work/default_relpos/mindspore/net.py" &&
   grep -q "self.index = mindspore.Parameter(.*requires_grad=False" "$work/default_relpos/mindspore/net.py"; then
  ok "relpos (default export): net.py gathers the table's elements and holds the index buffer"
else bad "relpos net.py: $(grep -m2 'table\|index' "$work/default_relpos/mindspore/net.py" | cut -c1-200)"; fi
cp -r "$work/default_relpos" "$work/relpos_swapped"
sed -E 's/(ops\.gather\(mindspore\.ops\.reshape\(self\.table, \(-1,\)\), mindspore\.Tensor\(np\.array\(\[)([0-9]+), ([0-9]+), /\1\3, \2, /' \
  "$work/default_relpos/mindspore/net.py" > "$work/relpos_swapped/mindspore/net.py"
"$MIGC" verify "$work/relpos_swapped" --reference "$fx/relpos/ref.npz" --backend mindspore-emu > "$work/swapped.log" 2>&1
rc=$?
! cmp -s "$work/default_relpos/mindspore/net.py" "$work/relpos_swapped/mindspore/net.py" && [ $rc -eq 1 ] &&
  grep -q "^output .*FAIL" "$work/swapped.log" && ok "relpos: two gather indices swapped fail the forward (exit 1)" ||
  bad "relpos swapped indices (exit $rc): $(grep -E '^output|^verify' "$work/swapped.log" | cut -c1-200)"
"$MIGC" convert "$fx/lstm/model_preserve.onnx" --weights "$fx/lstm/model.pth" --target mindspore -o "$work/lstm_out" \
  > /dev/null 2>&1 && cp "$work/lstm_out/mindspore/net.py" "$work/lstm.net.py"
if grep -q "^grad-group layer1.0.bn1 .*2 params.*PASS" "$work/resnet18.log" &&
   ! grep -q "moving_mean\|running_mean" "$work/resnet18.log"; then
  ok "resnet18: BatchNorm gamma/beta gradients matched to torch's weight/bias; no moving-statistics gradient"
else bad "resnet18 BatchNorm gradients: $(grep -m2 'bn1' "$work/resnet18.log")"; fi

# lstm: torch's two LSTM layers (two ONNX LSTMs whose weights are the parameters with
# their gates reordered) are one nn.LSTM(num_layers=2) holding the checkpoint's tensors
if grep -q "self.lstm = mindspore.nn.LSTM(input_size=16, hidden_size=24, num_layers=2," "$work/lstm.net.py" &&
   ! grep -q "ops.Custom\|ops.gather" "$work/lstm.net.py"; then
  ok "lstm: one nn.LSTM(num_layers=2) at 'lstm', no gate reordering or custom op in net.py"
else bad "lstm net.py: $(grep -m2 'lstm\|Custom' "$work/lstm.net.py" | cut -c1-200)"; fi
"$MIGC" coverage "$fx/lstm/model_preserve.onnx" --target mindspore > "$work/lstm.cov" 2>&1
grep -q "^| LSTM | 2 | supported |" "$work/lstm.cov" && grep -q "^| LSTM | 2 | supported | [a-z-]* | supported |" "$work/lstm_out/coverage.md" &&
  ok "lstm: migc coverage and convert's coverage.md both say the LSTMs convert" ||
  bad "lstm coverage: $(grep -m1 '| LSTM' "$work/lstm.cov") / $(grep -m1 '| LSTM' "$work/lstm_out/coverage.md")"
"$MIGC" verify "$fx/lstm" --backend mindspore-emu --grad --junit "$work/lstm.xml" > /dev/null 2>&1 &&
  xmllint --noout --schema tests/fixtures/junit-10.xsd "$work/lstm.xml" 2> /dev/null &&
  ok "lstm: --junit validates against the JUnit schema" || bad "lstm junit"
# topk_mlp: torch.topk is an ops.Custom CPU kernel (no rule for TopK), which runs
# forward and has no gradient: the forward verdict stands, the gradients are an error
"$MIGC" verify "$fx/topk_mlp" --backend mindspore-emu --grad > "$work/topk.log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "^output .*PASS" "$work/topk.log" &&
   grep -q "ERROR: not computed: node /TopK (TopK): custom-op .*cannot differentiate an ops.Custom kernel" "$work/topk.log"; then
  ok "topk_mlp: forward passes; gradients an error naming the ops.Custom TopK kernel (exit 1)"
else bad "topk_mlp (exit $rc): $(grep -E 'FAIL|ERROR|error' "$work/topk.log" | head -2 | cut -c1-300)"; fi
# conv1d_gn_prelu: each Conv1d is one nn.Conv1d holding the checkpoint's (out, in, 1, k) weight
grep -q 'mindspore.nn.Conv1d(in_channels=8, out_channels=16, kernel_size=3, stride=1, pad_mode="pad", padding=1,' \
  "$work/default_conv1d_gn_prelu/mindspore/net.py" && ok "conv1d_gn_prelu: an nn.Conv1d per Conv1d" ||
  bad "conv1d_gn_prelu net.py: $(grep -m1 'Conv' "$work/default_conv1d_gn_prelu/mindspore/net.py" | cut -c1-200)"

# --- an OUTDIR of migc convert --target mindspore, and mutations that must fail ---
out=$work/r18
"$MIGC" convert "$fx/resnet18/model_preserve.onnx" --weights "$fx/resnet18/model.pth" --target mindspore -o "$out" \
  > "$work/convert.log" 2>&1
verify_out() { # DIR LOG [extra args]
  local dir=$1 log=$2; shift 2
  "$MIGC" verify "$dir" --reference "$fx/resnet18/ref.npz" --backend mindspore-emu "$@" > "$log" 2>&1
}
verify_out "$out" "$work/out.log" --grad && grep -q "weights: 102 checkpoint tensors checked against the graph, 0 differ" \
  "$work/out.log" && ok "resnet18 OUTDIR --reference --grad passes, checkpoint checked ($(grep '^verify:' "$work/out.log"))" ||
  bad "resnet18 OUTDIR: $(grep -E 'FAIL|ERROR|error' "$work/out.log" | head -3 | cut -c1-300)"
$PY tests/fixtures/perturb.py ckpt "$out/model.ckpt" "$work/bad.ckpt" layer2.0.conv1.weight 1.01
verify_out "$out" "$work/ck.log" --ckpt "$work/bad.ckpt" --weights-map "$out/weight_map.json"
rc=$?
[ $rc -eq 1 ] && grep -q "^output .*FAIL" "$work/ck.log" &&
  grep -q "^weight .*layer2.0.conv1.weight .*FAIL" "$work/ck.log" &&
  ok "a checkpoint tensor scaled by 1%: the stand-in's forward fails (exit 1), the tensor is named" ||
  bad "perturbed checkpoint (exit $rc): $(grep -E '^output|^verify' "$work/ck.log" | cut -c1-200)"
grep -q "^localisation: no node-by-node localisation for --backend mindspore-emu" "$work/ck.log" &&
  ok "... and says this backend has no node-by-node localisation" || bad "localisation: $(grep -m1 '^local' "$work/ck.log")"

mutant() { # NAME SED-SCRIPT: net.py edited by SED-SCRIPT keeps the forward and must fail --grad
  local name=$1 dir=$work/m_$RANDOM
  cp -r "$out" "$dir"
  sed -E "$2" "$out/mindspore/net.py" > "$dir/mindspore/net.py"
  if cmp -s "$out/mindspore/net.py" "$dir/mindspore/net.py"; then bad "$name: the edit found nothing to change"; return; fi
  verify_out "$dir" "$work/mut.log" --grad
  local rc=$?
  if [ $rc -eq 1 ] && grep -q "^output .*PASS" "$work/mut.log" && grep -q "^grad-group .*FAIL" "$work/mut.log"; then
    ok "$name: forward passes, --grad fails (exit 1; $(grep -c '^grad-group .*FAIL' "$work/mut.log") gradient groups)"
  else bad "$name (exit $rc): $(grep -E '^output|^verify|error' "$work/mut.log" | cut -c1-200)"; fi
}
mutant "layer1.0's skip connection detached (ops.stop_gradient)" \
  's/(layer1_layer1_0_Add_output_0 = mindspore\.ops\.add\(input=[^,]*, other=)([A-Za-z0-9_]+)\)/\1mindspore.ops.stop_gradient(\2))/'
mutant "layer2.0's first ReLU with its gradient doubled (2y - stop_gradient(y))" \
  's/= (mindspore\.ops\.relu\(input=v[0-9]+__layer2_layer2_0_bn1_BatchNormalization_output_0, inplace=False\))/= mindspore.ops.sub(input=mindspore.ops.mul(input=\1, other=2.0), other=mindspore.ops.stop_gradient(\1))/'

# the stem conv's output detached: conv1.weight gets no gradient at all, which
# value_and_grad refuses under the stand-in: the forward stands, the gradients are an error
dir=$work/m_stem && cp -r "$out" "$dir"
sed -E 's/= (self\.conv1\([A-Za-z0-9_]+\))$/= mindspore.ops.stop_gradient(\1)/' "$out/mindspore/net.py" > "$dir/mindspore/net.py"
verify_out "$dir" "$work/stem.log" --grad
rc=$?
if ! cmp -s "$out/mindspore/net.py" "$dir/mindspore/net.py" && [ $rc -eq 1 ] && grep -q "^output .*PASS" "$work/stem.log" &&
   grep -q "ERROR: not computed: mindspore.value_and_grad under the stand-in failed: .*does not depend on" "$work/stem.log"; then
  ok "conv1's output detached: forward passes, the gradients are an error saying why (exit 1)"
else bad "conv1 detached (exit $rc): $(grep -E '^output|^input-grad|^verify' "$work/stem.log" | cut -c1-200)"; fi

# --- bad usage: exit 2 ---
mkdir -p "$work/nopth" && cp "$fx/resnet18/model_preserve.onnx" "$fx/resnet18/ref.npz" "$work/nopth/"
"$MIGC" verify "$work/nopth" --backend mindspore-emu > "$work/nopth.log" 2>&1
[ $? -eq 2 ] && grep -q "converts .* with its weights first" "$work/nopth.log" &&
  ok "a reference folder without model.pth: exit 2, saying why" || bad "no model.pth: $(head -2 "$work/nopth.log")"
"$MIGC" convert "$fx/resnet18/model_preserve.onnx" --weights "$fx/resnet18/model.pth" --target cpu -o "$work/cpuonly" \
  > /dev/null 2>&1
rm -rf "$work/cpuonly/mindspore"
verify_out "$work/cpuonly" "$work/cpu.log"
[ $? -eq 2 ] && grep -q "has no mindspore/net.py; convert with --target mindspore" "$work/cpu.log" &&
  ok "an OUTDIR without mindspore/net.py: exit 2, saying how to convert" || bad "no net.py: $(head -2 "$work/cpu.log")"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && rm -rf "$work"
[ $fail -eq 0 ]
