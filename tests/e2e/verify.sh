#!/bin/bash
# `migc verify` end to end on small reference folders written with torch
# (tests/fixtures/make_verify_ref.py, the tools/torch_reference.py format): a pass,
# gradients, mutations that must fail with the right node named (a weight scaled by
# 1% in the ONNX and in the checkpoint, Gelu swapped for its tanh form, LayerNorm
# epsilon 1e-7, a Conv's padding changed in the generated C), bad inputs (exit 2),
# policy files, the JSON fields, and JUnit that validates and parses.
# usage: tests/e2e/verify.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
SRC=$(pwd)
BUILD=$(cd "$BUILD" && pwd)
MIGC=$BUILD/migc
PY=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
check() { # description command... (passes when the command succeeds)
  local what=$1; shift
  if "$@" > "$work/last.log" 2>&1; then pass=$((pass + 1)); echo "ok   $what"
  else fail=$((fail + 1)); echo "FAIL $what"; sed 's/^/     /' "$work/last.log" | head -8; fi
}
status_is() { # expected-status command...
  local want=$1; shift
  "$@" > "$work/status.log" 2>&1
  local got=$?
  [ $got -eq "$want" ] || { echo "exit $got, wanted $want"; cat "$work/status.log"; return 1; }
}
says() { # pattern command... (exit status ignored; output must match)
  local pat=$1; shift
  "$@" > "$work/says.log" 2>&1
  grep -q -- "$pat" "$work/says.log" || { echo "no '$pat' in:"; cat "$work/says.log"; return 1; }
}
jq_py() { # FILE PYTHON-EXPR (j is the parsed JSON; the expression must be true)
  $PY -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}

ref=$work/tiny
$PY tests/fixtures/make_verify_ref.py "$ref" > /dev/null 2>&1 || { echo "FAIL fixture (torch)"; exit 1; }
$PY tests/fixtures/make_verify_ref.py "$work/gelu" --gelu-tanh > /dev/null 2>&1
$PY tests/fixtures/make_verify_ref.py "$work/cnn" --arch cnn > /dev/null 2>&1

# --- passing ---
check "reference folder passes (exit 0)" status_is 0 "$MIGC" verify "$ref"
check "the table names the output and the layers" says "layers .*PASS: 9 module outputs" "$MIGC" verify "$ref"
check "long form on the ONNX with --reference passes" status_is 0 "$MIGC" verify "$ref/model_preserve.onnx" \
  --reference "$ref/ref.npz"
check "the default export (BatchNorm folded) passes forward" status_is 0 "$MIGC" verify "$ref/model.onnx" \
  --reference "$ref/ref.npz"
check "--json and --junit are written" "$MIGC" verify "$ref" --json "$work/p.json" --junit "$work/p.xml"
check "json: verdict pass, metrics present" jq_py "$work/p.json" \
  "j['verdict']=='pass' and set(j['outputs'][0]['metrics'])>={'max_abs_err','max_rel_err','cosine','rel_norm_err','ulp','frac_over_tol'} and set(j['outputs'][0]['metrics']['ulp'])=={'median','p99','max'} and j['outputs'][0]['tolerance']['rtol']==1e-3 and j['layers']['status']=='PASS'"
check "junit parses with xml.etree: one testcase per output plus layers" $PY -c "
import xml.etree.ElementTree as E, sys
r = E.parse(sys.argv[1]).getroot(); s = r.find('testsuite')
assert r.tag == 'testsuites' and s.get('tests') == '2' and s.get('failures') == '0', E.tostring(r)
assert [c.get('name') for c in s.findall('testcase')] == ['output output', 'layers torch modules']" "$work/p.xml"
check "junit validates against the JUnit schema" xmllint --noout --schema tests/fixtures/junit-10.xsd "$work/p.xml"
check "no temporary files left beside the reports" bash -c "! ls -a '$work' | grep -q 'tmp\\.'"

check "--grad passes on the reference folder" status_is 0 "$MIGC" verify "$ref" --grad --json "$work/g.json" \
    --junit "$work/g.xml"
  check "json: input gradient and one group per module, nothing unmapped" jq_py "$work/g.json" \
    "[g['name'] for g in j['gradients']['groups']]==['features.conv1','features.bn1','features.conv2','norm','fc1','fc2'] and len(j['gradients']['params'])==12 and j['gradients']['unmapped']==[] and j['gradients']['inputs'][0]['metrics']['cosine']>0.9999"
  check "junit: outputs, layers, input gradient, 6 gradient groups" $PY -c "
import xml.etree.ElementTree as E, sys
s = E.parse(sys.argv[1]).getroot().find('testsuite')
assert s.get('tests') == '9', s.get('tests')
assert sum(c.get('classname') == 'verify.gradients' for c in s.findall('testcase')) == 7" "$work/g.xml"
  check "junit (gradients) validates" xmllint --noout --schema tests/fixtures/junit-10.xsd "$work/g.xml"

# --- mutations: exit 1 and the right node ---
$PY tests/fixtures/perturb.py onnx "$ref/model_preserve.onnx" "$work/w1.onnx" features.conv2.weight 1.01
check "a weight scaled by 1% in the ONNX: exit 1" status_is 1 "$MIGC" verify "$work/w1.onnx" --reference "$ref/ref.npz"
check "... names the Conv and its torch module" says "first diverging node: '/features/conv2/Conv' (Conv), torch module 'features.conv2'" \
  "$MIGC" verify "$work/w1.onnx" --reference "$ref/ref.npz"
check "... shows the weight differs from model.pth, the activation input agrees" bash -c \
  "'$MIGC' verify '$work/w1.onnx' --reference '$ref/ref.npz' | grep \"input 'features.conv2.weight' (weights).*differs\" &&
   '$MIGC' verify '$work/w1.onnx' --reference '$ref/ref.npz' | grep \"input '/features/relu/Relu_output_0' .*cosine 1.0000\" | grep -vq differs"
"$MIGC" verify "$work/w1.onnx" --reference "$ref/ref.npz" --json "$work/f.json" --junit "$work/f.xml" > /dev/null
check "json: verdict fail, localisation names the node" jq_py "$work/f.json" \
  "j['verdict']=='fail' and j['localisation']['node']=='/features/conv2/Conv' and j['localisation']['module']=='features.conv2'"
check "junit: failures carry the metrics and the culprit" $PY -c "
import xml.etree.ElementTree as E, sys
s = E.parse(sys.argv[1]).getroot().find('testsuite')
f = [c.find('failure') for c in s.findall('testcase') if c.find('failure') is not None]
assert s.get('failures') == str(len(f)) and f, E.tostring(s)
assert 'cosine=' in f[0].get('message') and '/features/conv2/Conv' in f[0].text" "$work/f.xml"
check "junit (failing) validates" xmllint --noout --schema tests/fixtures/junit-10.xsd "$work/f.xml"

check "Gelu in its tanh form: exit 1" status_is 1 "$MIGC" verify "$work/gelu"
check "... names the act module" says "torch module 'act'" "$MIGC" verify "$work/gelu"
$PY - "$ref/model_preserve.onnx" "$work/eps.onnx" <<'PY'
import onnx, sys
m = onnx.load(sys.argv[1])
for n in m.graph.node:
    if n.op_type == 'LayerNormalization':
        for a in n.attribute:
            if a.name == 'epsilon': a.f = 1e-7
onnx.save(m, sys.argv[2])
PY
check "LayerNorm epsilon 1e-7: exit 1 naming the LayerNormalization" says \
  "first diverging node: '/norm/LayerNormalization' (LayerNormalization), torch module 'norm'" \
  "$MIGC" verify "$work/eps.onnx" --reference "$ref/ref.npz"
check "... and exit 1" status_is 1 "$MIGC" verify "$work/eps.onnx" --reference "$ref/ref.npz"

# --- policy ---
printf '<parity-policy>\n  <model match="*Tiny">\n    <forward rel-norm="1e-3"/>\n  </model>\n</parity-policy>\n' > "$work/loose.xml"
check "a policy loosening the layer tolerance lets the Gelu approximation pass" status_is 0 \
  "$MIGC" verify "$work/gelu" --policy "$work/loose.xml"
printf '<parity-policy>\n  <output name="output" atol="0" rtol="0"/>\n</parity-policy>\n' > "$work/badpol.xml"
check "policy: <output> outside <model> is an error with file:line (exit 2)" says "badpol.xml:2:" \
  "$MIGC" verify "$ref" --policy "$work/badpol.xml"
printf '<parity-policy>\n  <model match="*">\n    <output name="output" atol="0" rtol="0"/>\n  </model>\n</parity-policy>\n' > "$work/tight.xml"
check "a per-output policy tightening to exact fails the output (exit 1)" status_is 1 \
  "$MIGC" verify "$ref" --policy "$work/tight.xml"
check "--rtol/--atol on the command line" status_is 1 "$MIGC" verify "$ref" --rtol 0 --atol 0

# --- convert output folder, checkpoint check ---
out=$work/conv
"$MIGC" convert "$ref/model_preserve.onnx" --weights "$ref/model.pth" -o "$out" > /dev/null 2>&1
check "convert writes convert.json with the absolute model path" jq_py "$out/convert.json" \
  "j['model']=='$(cd "$ref" && pwd)/model_preserve.onnx'"
check "verify OUTDIR --reference passes, checkpoint checked" says "weights: 14 checkpoint tensors checked against the graph, 0 differ" \
  "$MIGC" verify "$out" --reference "$ref/ref.npz"
$PY tests/fixtures/perturb.py ckpt "$out/model.ckpt" "$work/bad.ckpt" features.conv1.weight 1.01
check "a checkpoint weight scaled by 1%: exit 1" status_is 1 "$MIGC" verify "$out" --reference "$ref/ref.npz" \
  --ckpt "$work/bad.ckpt" --weights-map "$out/weight_map.json"
check "... names the tensor and the node reading it" says "features.conv1.weight.*FAIL.*read by node /features/conv1/Conv" \
  "$MIGC" verify "$out" --reference "$ref/ref.npz" --ckpt "$work/bad.ckpt" --weights-map "$out/weight_map.json"

# --- the C backend ---
if command -v cc > /dev/null; then
  check "--backend c on a converted-on-the-fly model passes" status_is 0 "$MIGC" verify "$work/cnn" --backend c
  cout=$work/cnnout
  "$MIGC" convert "$work/cnn/model_preserve.onnx" -o "$cout" --input-shape input=2x3x8x8 > /dev/null 2>&1
  check "--backend c on OUTDIR (built by verify) passes" status_is 0 "$MIGC" verify "$cout" \
    --reference "$work/cnn/ref.npz" --backend c
  # conv2: pads (1,1,1,1) -> (0,0,2,2), same output size
  sed -i 's/1, 2, 2, 1, 1, 1, 1, 1, 1, 4, 4,/1, 2, 2, 1, 1, 0, 0, 2, 2, 4, 4,/' "$cout/cpu/model.c"
  rm -f "$cout/cpu/runner"
  check "a Conv's padding changed in the generated C: exit 1" status_is 1 "$MIGC" verify "$cout" \
    --reference "$work/cnn/ref.npz" --backend c
  check "... localised through the runner's trace: the Conv, its input agreeing" says \
    "input '/features/relu/Relu_output_0' \[features.relu\] (trace): .*cosine 1.0000" \
    "$MIGC" verify "$cout" --reference "$work/cnn/ref.npz" --backend c
  check "... naming the Conv" says "first diverging node: '/features/conv2/Conv' (Conv), torch module 'features.conv2'" \
    "$MIGC" verify "$cout" --reference "$work/cnn/ref.npz" --backend c

  # LayerNorm epsilon 1e-7 in the generated C (1e-5 is 0x1.4f8b58p-17f there)
  lout=$work/tinyout
  "$MIGC" convert "$ref/model_preserve.onnx" -o "$lout" > /dev/null 2>&1
  sed -i 's/0x1\.4f8b58p-17f/1e-7f/' "$lout/cpu/model.c"
  check "a LayerNorm epsilon of 1e-7 in the generated C: exit 1" status_is 1 "$MIGC" verify "$lout" \
    --reference "$ref/ref.npz" --backend c
  check "... naming the LayerNormalization" says \
    "first diverging node: '/norm/LayerNormalization' (LayerNormalization), torch module 'norm'" \
    "$MIGC" verify "$lout" --reference "$ref/ref.npz" --backend c

  # The trace comparison, with a stand-in for the runner's --trace mode: the real
  # runner computes the outputs; `migc run` on a copy of the model whose every node
  # output is a graph output writes the trace (the file names the runner uses).
  tout=$work/traced
  "$MIGC" convert "$work/cnn/model_preserve.onnx" -o "$tout" --input-shape input=2x3x8x8 > /dev/null 2>&1
  make -s -C "$tout/cpu" > /dev/null 2>&1
  mv "$tout/cpu/runner" "$tout/cpu/runner.real"
  all_outputs() {
    $PY -c "
import onnx, sys
m = onnx.load(sys.argv[1])
have = {o.name for o in m.graph.output}
for n in m.graph.node:
    for o in n.output:
        if o and o not in have:
            m.graph.output.append(onnx.helper.make_empty_tensor_value_info(o)); have.add(o)
onnx.save(m, sys.argv[2])" "$1" "$2"
  }
  all_outputs "$work/cnn/model_preserve.onnx" "$work/all_good.onnx"
  $PY tests/fixtures/perturb.py onnx "$work/cnn/model_preserve.onnx" "$work/cnn_w.onnx" features.conv2.weight 1.01
  all_outputs "$work/cnn_w.onnx" "$work/all_bad.onnx"
  {
    echo '#!/bin/bash'
    echo 'args=(); ins=(); trace='
    echo 'while [ $# -gt 0 ]; do'
    echo '  case "$1" in --trace) trace=$2; shift 2;; --input) ins+=(--input "$2"); args+=("$1" "$2"); shift 2;;'
    echo '  *) args+=("$1"); shift;; esac'
    echo 'done'
    echo '"$(dirname "$0")/runner.real" "${args[@]}" > /dev/null || exit $?'
    echo "[ -z \"\$trace\" ] || '$MIGC' run \"\$(cat '$work/trace_model')\" \"\${ins[@]}\" --output-dir \"\$trace\" > /dev/null"
  } > "$tout/cpu/runner"
  chmod +x "$tout/cpu/runner"
  echo "$work/all_good.onnx" > "$work/trace_model"
  check "c: traced node outputs agree with the interpreter" says \
    "layers .*generated code vs interpreter.*PASS: 7 traced node outputs agree" \
    "$MIGC" verify "$tout" --reference "$work/cnn/ref.npz" --backend c
  echo "$work/all_bad.onnx" > "$work/trace_model"
  check "c: a traced node that diverges fails the gate (exit 1)" status_is 1 "$MIGC" verify "$tout" \
    --reference "$work/cnn/ref.npz" --backend c
  "$MIGC" verify "$tout" --reference "$work/cnn/ref.npz" --backend c > "$work/t.log" 2>&1
  check "... naming the node and its torch module" grep -q \
    "first diverging node: '/features/conv2/Conv' (Conv), torch module 'features.conv2'" "$work/t.log"
  check "... with its input agreeing in the trace" bash -c \
    "grep \"input '/features/relu/Relu_output_0'\" '$work/t.log' | grep -q '(trace).*cosine 1.0000'"
fi

# --- bad input: exit 2 ---
mkdir -p "$work/empty"
check "no argument" status_is 2 "$MIGC" verify
check "missing folder" status_is 2 "$MIGC" verify "$work/nope"
check "folder without a model" status_is 2 "$MIGC" verify "$work/empty"
check "ONNX without --reference" status_is 2 "$MIGC" verify "$ref/model.onnx"
check "unknown backend" status_is 2 "$MIGC" verify "$ref" --backend gpu
check "unknown option" status_is 2 "$MIGC" verify "$ref" --frobnicate
check "--ckpt without --weights-map" status_is 2 "$MIGC" verify "$ref" --ckpt "$out/model.ckpt"
check "negative --rtol" status_is 2 "$MIGC" verify "$ref" --rtol -1
check "reference that is not an npz" status_is 2 "$MIGC" verify "$ref/model.onnx" --reference "$ref/ref.json"
$PY -c "import numpy as np, sys; np.savez(sys.argv[1], **{'outputs/output': np.zeros((2, 5), 'f4')})" "$work/noin.npz"
check "reference without the model's inputs" says "inputs/input" "$MIGC" verify "$ref/model.onnx" --reference "$work/noin.npz"
check "... exit 2" status_is 2 "$MIGC" verify "$ref/model.onnx" --reference "$work/noin.npz"
check "missing policy file" status_is 2 "$MIGC" verify "$ref" --policy "$work/none.xml"
check "--json into a missing folder" status_is 2 "$MIGC" verify "$ref" --json "$work/no/such/dir.json"
check "--help exits 0" status_is 0 "$MIGC" verify --help

# --- the reference's own float32 noise (issue 18): correct conversions pass, a 1% weight error fails ---
fx=$SRC/build/fixtures/verify_noise
want=$(sha256sum tools/torch_reference.py tests/fixtures/parity_models.py tests/fixtures/export_torchvision.py | sha256sum | cut -c1-16)
if [ "$(cat "$fx/.stamp" 2>/dev/null)" != "$want" ]; then
  rm -rf "$fx" && mkdir -p "$fx"
  $PY tools/torch_reference.py tests.fixtures.parity_models:resnet18 --input-shape 1x3x64x64 --perturb \
    -o "$fx/resnet18" > /dev/null 2>&1 &&
  $PY tools/torch_reference.py tests.fixtures.parity_models:ssdlite_backbone --input-shape 1x3x320x320 --perturb \
    -o "$fx/ssdlite" > /dev/null 2>&1 &&
  $PY tools/torch_reference.py tests.fixtures.parity_models:upsample_head --input-shape 1x4x7x9 \
    -o "$fx/upsample" > /dev/null 2>&1 &&
  $PY tools/torch_reference.py tests.fixtures.parity_models:einsum_mix --input-shape 2x5x6 \
    -o "$fx/einsum" > /dev/null 2>&1 && echo "$want" > "$fx/.stamp"
fi
check "ref.npz holds the float64 outputs (outputs_f64/)" $PY -c "
import numpy as np, sys; z = np.load(sys.argv[1]); assert z['outputs_f64/output'].dtype == np.float64" "$fx/resnet18/ref.npz"
check "resnet18 64x64 --perturb: verify --grad passes (interp)" status_is 0 "$MIGC" verify "$fx/resnet18" --grad
check "... the output row shows the reference noise" says "^output .* [0-9.]*e-0[0-9]  PASS" "$MIGC" verify "$fx/resnet18"
check "... without the noise allowance it fails, as before (policy noise=0)" bash -c \
  "printf '<parity-policy><forward noise=\"0\"/></parity-policy>' > '$work/n0.xml' && \
   '$MIGC' verify '$fx/resnet18' --policy '$work/n0.xml' > '$work/n0.log' 2>&1; [ \$? -eq 1 ]"
check "... and localisation says the error accumulates" grep -q "the error accumulates, from rel norm" "$work/n0.log"
check "resnet18: passes on the C backend" status_is 0 "$MIGC" verify "$fx/resnet18" --backend c
cp -r "$fx/resnet18" "$work/r18w"
$PY tests/fixtures/perturb.py onnx "$fx/resnet18/model_preserve.onnx" "$work/r18w/model_preserve.onnx" \
  layer2.0.conv1.weight 1.01
check "resnet18 with one weight 1% off: exit 1, naming the module" bash -c \
  "'$MIGC' verify '$work/r18w' > '$work/r18w.log' 2>&1; [ \$? -eq 1 ] && grep -q \"first diverging node.*layer2.0.conv1\" '$work/r18w.log'"
check "ssdlite320 backbone --perturb: verify --grad passes (interp)" status_is 0 "$MIGC" verify "$fx/ssdlite" --grad
check "ssdlite320 backbone: passes on the C backend" status_is 0 "$MIGC" verify "$fx/ssdlite" --backend c
check "Resize (align_corners, scale 2.5): gradients through its VJP pass" status_is 0 "$MIGC" verify "$fx/upsample" --grad
check "an op without a VJP: the forward verdict stands, the op is named, exit 1" bash -c \
  "'$MIGC' verify '$fx/einsum' --grad > '$work/ein.log' 2>&1; [ \$? -eq 1 ] && \
   grep -q '^output .*PASS' '$work/ein.log' && grep -q 'ERROR: not computed:.*(Einsum): no vector-Jacobian product for Einsum' '$work/ein.log'"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
