#!/bin/bash
# migc coverage end to end: one report over the ONNX node tests and the torchvision
# zoo (no crash, every op counted and given a status per target, checked by
# ../shared/acceptance/coverage-check.py); honesty on a model with a custom-domain
# op; rules-file errors; the HTML page rendered by headless Chromium; and
# docs/coverage.md in step with the rules.
# usage: tests/e2e/coverage.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$BUILD/migc
work=build/fixtures/coverage tv=build/fixtures/tv
mkdir -p "$work" "$tv"
ZOO=resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,squeezenet1_1,shufflenet_v2_x1_0,densenet121,googlenet,inception_v3,regnet_y_400mf,convnext_tiny,vit_b_16,swin_t,maxvit_t,deeplabv3_mobilenet_v3_large,fcn_resnet50,lraspp_mobilenet_v3_large
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models "$ZOO" --opsets 17 --modes default >/dev/null ||
  { echo "export failed"; exit 1; }
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

zoo=(); for m in ${ZOO//,/ }; do zoo+=("$tv/${m}_op17_default.onnx"); done
if "$MIGC" coverage "${zoo[@]}" --format json -o "$work/zoo.json" 2>"$work/zoo.err"; then
  res=$(/usr/bin/python3 ../shared/acceptance/coverage-check.py "$work/zoo.json" "${zoo[@]}" | tail -1)
  [[ $res == "1 passed, 0 failed" ]] && ok "torchvision zoo report: $res" || bad "torchvision zoo report: $res"
else bad "coverage over the zoo: $(tail -1 "$work/zoo.err")"; fi
# the op types the zoo uses all have MindSpore and aclnn rules that convert them
gaps=$(jq -r '[.models[].ops[] | select(.status.mindspore != "supported" and .status.mindspore != "decomposed"
  or .status.ascend != "supported" and .status.ascend != "decomposed") | .op] | unique | join(" ")' "$work/zoo.json")
types=$(jq -r '[.models[].ops[].op] | unique | length' "$work/zoo.json")
# every op type that does not convert is listed, with its reason, in docs/coverage.md's gaps
unlisted=""
for op in $gaps; do
  sed -n '/^## Gaps/,$p' docs/coverage.md | grep -q "^- $op: .*(.\+)" || unlisted="$unlisted $op"
done
if [ -z "$unlisted" ]; then ok "$types op types in the zoo: each converts for mindspore and ascend, or is a listed gap (${gaps:-none})"
else bad "op types that neither convert nor are listed with a reason in docs/coverage.md:$unlisted"; fi

node=(); while IFS= read -r m; do node+=("$m"); done < <(find ../shared/onnx-conformance/node -name model.onnx | sort)
if "$MIGC" coverage "${node[@]}" --format json -o "$work/node.json" 2>/dev/null; then
  res=$(/usr/bin/python3 ../shared/acceptance/coverage-check.py "$work/node.json" | tail -1)
  [[ $res == "1 passed, 0 failed" ]] && ok "report over ${#node[@]} node tests: $res" || bad "node report: $res"
else bad "coverage over node/ exited non-zero"; fi

# honesty: a custom-domain op is named with its node, the rest still converts, exit 0
/usr/bin/python3 tests/fixtures/make_bad_models.py -o "$work/bad" >/dev/null
if "$MIGC" coverage "$work/bad/custom_op.onnx" --format json -o "$work/custom.json" 2>/dev/null &&
   jq -e '.models[0].ops[] | select(.op == "com.example::MyOp") | .status.mindspore == "unsupported-op" and (.nodes | length) == 1' "$work/custom.json" >/dev/null &&
   jq -e '.models[0].ops[] | select(.op == "Relu") | .status.mindspore == "supported"' "$work/custom.json" >/dev/null; then
  ok "custom op named, with its node, the rest converted"
else bad "custom op report"; fi

# ... and the same model is a clear error for convert --strict (exit 2, naming the
# node), while a plain convert still converts the rest (exit 0)
if "$MIGC" convert "$work/bad/custom_op.onnx" -o "$work/conv_custom" --cpu-only > /dev/null 2>"$work/conv.err" &&
   [ -s "$work/conv_custom/cpu/model.c" ] && grep -q "MyOp" "$work/conv.err"; then
  ok "convert without --strict: the rest converted, the custom op named"
else bad "convert of a model with a custom op"; fi
"$MIGC" convert "$work/bad/custom_op.onnx" -o "$work/conv_strict" --strict --target cpu,mindspore > /dev/null 2>"$work/strict.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "MyOp" "$work/strict.err" && grep -q -- "--strict" "$work/strict.err"; then
  ok "convert --strict: exit 2 naming the custom op"
else bad "convert --strict on a custom op (exit $rc)"; fi

# rules errors: file:line:reason and exit 2
printf '<rules target="mindspore">\n<rule op="Relu">\n<call api="mindspore.ops.relu">\n</rule>\n</rules>\n' > "$work/malformed.xml"
printf '<rules target="mindspore">\n<rule op="NoSuchOp">\n<call api="x"/>\n</rule>\n</rules>\n' > "$work/unknown.xml"
printf '<rules target="mindspore">\n<rule op="Relu"><call api="a"/></rule>\n<rule op="Relu"><call api="b"/></rule>\n</rules>\n' > "$work/dup.xml"
for r in malformed.xml:4 unknown.xml:2 dup.xml:3; do
  f=${r%%:*} line=${r##*:}
  "$MIGC" coverage "$work/bad/custom_op.onnx" --rules "$work/$f" >/dev/null 2>"$work/err"; rc=$?
  # libxml2 reports a malformed file where it noticed the problem, which may be past the tag
  if [ $rc -eq 2 ] && grep -qE "$f:($line|[0-9]+): " "$work/err" && { [ "$f" = malformed.xml ] || grep -q "$f:$line:" "$work/err"; }; then
    ok "rules error $f: $(head -1 "$work/err")"
  else bad "rules error $f: rc=$rc $(head -1 "$work/err")"; fi
done

# HTML: one self-contained page that renders in headless Chromium
"$MIGC" coverage "$tv/resnet18_op17_default.onnx" "$work/bad/custom_op.onnx" --format html -o "$work/report.html" 2>/dev/null
if grep -qiE '(src|href)=["'"'"']?(https?:)?//' "$work/report.html"; then bad "the HTML fetches from the network"
else ok "the HTML has no network fetches"; fi
if bash tests/e2e/html_screenshot.sh "$work/report.html" "$work/report.png"; then ok "HTML renders in headless Chromium"
else bad "HTML did not render"; fi

# docs/coverage.md is generated from the rules; regenerate and compare
if bash tools/gen_coverage_doc.sh "$BUILD" "$work/coverage.md" >/dev/null 2>&1 && diff -q "$work/coverage.md" docs/coverage.md >/dev/null; then
  ok "docs/coverage.md matches the rules"
else bad "docs/coverage.md is stale: run tools/gen_coverage_doc.sh $BUILD docs/coverage.md"; fi
# --input-shape, as convert takes it: a dynamic batch fixed makes the shape-dependent nodes mappable
/usr/bin/python3 - "$work/dyn.onnx" <<'PY'
import sys, onnx
from onnx import helper as h, TensorProto as T
g = h.make_graph([h.make_node('Relu', ['x'], ['y'])], 'g', [h.make_tensor_value_info('x', T.FLOAT, ['batch', 3])],
                 [h.make_tensor_value_info('y', T.FLOAT, ['batch', 3])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), sys.argv[1])
PY
if "$MIGC" coverage "$work/dyn.onnx" --input-shape x=2x3 --format json -o "$work/dyn.json" 2>/dev/null &&
   /usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['models'][0]['targets']['cpu']['converted_rate'] == 1.0" "$work/dyn.json"; then
  ok "--input-shape fixes a dynamic batch: the node is converted"
else bad "--input-shape fixes a dynamic batch: the node is converted"; fi
"$MIGC" coverage "$work/dyn.onnx" --input-shape x2x3 > /dev/null 2>&1
[ $? -eq 2 ] && ok "a malformed --input-shape exits 2" || bad "a malformed --input-shape exits 2"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
