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
. tests/e2e/zoo_lists.sh
ZOO=${MIGC_ZOO:-$ZOO_TEST}
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models "$ZOO" --opsets 17 --modes default >/dev/null ||
  { echo "export failed"; exit 1; }
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

zoo=(); for m in ${ZOO//,/ }; do zoo+=("$tv/${m}_op17_default.onnx"); done
if "$MIGC" coverage "${zoo[@]}" --force --format json -o "$work/zoo.json" 2>"$work/zoo.err"; then
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
if "$MIGC" coverage "${node[@]}" --force --format json -o "$work/node.json" 2>/dev/null; then
  res=$(/usr/bin/python3 ../shared/acceptance/coverage-check.py "$work/node.json" | tail -1)
  [[ $res == "1 passed, 0 failed" ]] && ok "report over ${#node[@]} node tests: $res" || bad "node report: $res"
else bad "coverage over node/ exited non-zero"; fi

# honesty: a custom-domain op is named with its node, the rest still converts, exit 0
/usr/bin/python3 tests/fixtures/make_bad_models.py -o "$work/bad" >/dev/null
if "$MIGC" coverage "$work/bad/custom_op.onnx" --force --format json -o "$work/custom.json" 2>/dev/null &&
   jq -e '.models[0].ops[] | select(.op == "com.example::MyOp") | .status.mindspore == "unsupported-op" and (.nodes | length) == 1' "$work/custom.json" >/dev/null &&
   jq -e '.models[0].ops[] | select(.op == "Relu") | .status.mindspore == "supported"' "$work/custom.json" >/dev/null; then
  ok "custom op named, with its node, the rest converted"
else bad "custom op report"; fi

# ... and the same model is a clear error for convert --strict (exit 2, naming the
# node), while a plain convert still converts the rest (exit 0)
if "$MIGC" convert "$work/bad/custom_op.onnx" -o "$work/conv_custom" --cpu-only --force > /dev/null 2>"$work/conv.err" &&
   [ -s "$work/conv_custom/cpu/model.c" ] && grep -q "MyOp" "$work/conv.err"; then
  ok "convert without --strict: the rest converted, the custom op named"
else bad "convert of a model with a custom op"; fi
"$MIGC" convert "$work/bad/custom_op.onnx" -o "$work/conv_strict" --force --strict --target cpu,mindspore > /dev/null 2>"$work/strict.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "MyOp" "$work/strict.err" && grep -q -- "--strict" "$work/strict.err"; then
  ok "convert --strict: exit 2 naming the custom op"
else bad "convert --strict on a custom op (exit $rc)"; fi

# rules errors: file:line:reason and exit 2
printf '<rules target="mindspore">\n<rule op="Relu">\n<call api="mindspore.ops.relu">\n</rule>\n</rules>\n' > "$work/malformed.xml"
printf '<rules target="mindspore">\n<rule op="NoSuchOp">\n<call api="x"/>\n</rule>\n</rules>\n' > "$work/unknown.xml"
printf '<rules target="mindspore">\n<rule op="Relu"><call api="a"/></rule>\n<rule op="Relu"><call api="b"/></rule>\n</rules>\n' > "$work/dup.xml"
# a value outside the vocabulary (mapping/values.def), an attr() the op does not
# have, and a <require input> without a valid present
printf '<rules target="mindspore">\n<rule op="Relu">\n<call api="a">\n<arg name="x" value="frobnicate(input(0))"/>\n</call>\n</rule>\n</rules>\n' > "$work/value.xml"
printf '<rules target="mindspore">\n<rule op="Relu">\n<call api="a">\n<arg name="x" value="input(0)"/>\n<arg name="y" value="attr(group)"/>\n</call>\n</rule>\n</rules>\n' > "$work/attr.xml"
printf '<rules target="mindspore">\n<rule op="LSTM">\n<require input="4" present="sometimes"/>\n<call api="a"/>\n</rule>\n</rules>\n' > "$work/present.xml"
printf '<rules target="mindspore">\n<rule op="Relu">\n<call api="a">\n<arg name="x" value="input(0)"/>\n<arg name="x" value="input(0)"/>\n</call>\n</rule>\n</rules>\n' > "$work/argtwice.xml"
# two <call>s, the second with more arguments than the first (found by fuzz_rules_xml:
# the second was read with the first's argument count)
printf '<rules target="mindspore">\n<rule op="Relu">\n<call api="a">\n<arg name="x" value="input(0)"/>\n</call>\n<call api="b">\n<arg name="x" value="input(0)"/>\n<arg name="y" value="input(0)"/>\n</call>\n</rule>\n</rules>\n' > "$work/twocalls.xml"
for r in malformed.xml:4 unknown.xml:2 dup.xml:3 value.xml:4 attr.xml:5 present.xml:3 argtwice.xml:5 twocalls.xml:6; do
  f=${r%%:*} line=${r##*:}
  "$MIGC" coverage "$work/bad/custom_op.onnx" --rules "$work/$f" >/dev/null 2>"$work/err"; rc=$?
  # libxml2 reports a malformed file where it noticed the problem, which may be past the tag
  if [ $rc -eq 2 ] && grep -qE "$f:($line|[0-9]+): " "$work/err" && { [ "$f" = malformed.xml ] || grep -q "$f:$line:" "$work/err"; }; then
    ok "rules error $f: $(head -1 "$work/err")"
  else bad "rules error $f: rc=$rc $(head -1 "$work/err")"; fi
done

# every <require> is enforced, and the report names the one that failed: an LSTM
# with sequence_lens (MindSpore's rule wants input 4 absent), a Conv whose
# auto_pad no MindSpore rule allows (symbolic spatial dims, so it stays), a dtype
# aclnn's Equal rule excludes
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
d = sys.argv[1]
def save(name, nodes, ins, outs, inits=()):
    g = h.make_graph(nodes, name, ins, outs, list(inits))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), "%s/%s.onnx" % (d, name))
f = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)
r = np.random.default_rng(0)
w = lambda n, *s: nh.from_array(r.standard_normal(s).astype(np.float32), n)
lens = nh.from_array(np.array([5], np.int32), "lens")
for tag, extra in (("lstm_lens", ["lens"]), ("lstm_plain", [])):
    save(tag, [h.make_node("LSTM", ["x", "W", "R", "B"] + extra, ["y"], hidden_size=3)],
         [f("x", [5, 1, 4])], [f("y", None)], [w("W", 1, 12, 4), w("R", 1, 12, 3), w("B", 1, 24)] + ([lens] if extra else []))
# symbolic spatial dims keep auto_pad (preparation resolves it only where they are static)
# (the weight is named as torch names a module's, which the MindSpore cell needs)
save("conv_same_lower", [h.make_node("Conv", ["x", "conv.weight"], ["y"], auto_pad="SAME_LOWER", kernel_shape=[2, 2])],
     [f("x", [1, 1, "h", "w"])], [f("y", None)], [w("conv.weight", 1, 1, 2, 2)])
save("conv_same_lower_static", [h.make_node("Conv", ["x", "conv.weight"], ["y"], auto_pad="SAME_LOWER",
                                            kernel_shape=[2, 2])],
     [f("x", [1, 1, 5, 5])], [f("y", None)], [w("conv.weight", 1, 1, 2, 2)])
save("equal_f32", [h.make_node("Equal", ["a", "b"], ["y"])], [f("a", [3]), f("b", [3])],
     [h.make_tensor_value_info("y", T.BOOL, None)])
PY
req() { # name model target status reason-substring
  local name=$1 model=$2 t=$3 st=$4 why=$5
  "$MIGC" coverage "$work/$model.onnx" --force --format json -o "$work/$model.json" 2>/dev/null
  if jq -e --arg t "$t" --arg st "$st" --arg why "$why" \
       '[.models[0].ops[] | select((.status[$t] == $st) and (.reason[$t] | contains($why)))] | length > 0' \
       "$work/$model.json" > /dev/null; then ok "$name"
  else bad "$name: $(jq -c --arg t "$t" '[.models[0].ops[] | {op, s: .status[$t], r: .reason[$t]}]' "$work/$model.json")"; fi
}
req "LSTM with sequence_lens: MindSpore says which requirement failed" lstm_lens mindspore unsupported-attribute \
  "input 4 is given; the rule requires it absent"
# without it the rule matches; what stops it now is the emitter, which names the gate
# reordering it cannot apply in net.py yet (the coverage column is the emitter's)
req "... and without it the rule matches: the emitter names the gate transform it lacks" lstm_plain mindspore \
  unsupported-attribute "lstm_gates_iofc_to_ifgo"
req "Conv auto_pad=SAME_LOWER: MindSpore names the attribute and what its rules allow" conv_same_lower mindspore \
  unsupported-attribute "attribute auto_pad=SAME_LOWER; the rule allows"
req "... and with static dims preparation writes its (asymmetric) pads: MindSpore's pads_tblr maps it" \
  conv_same_lower_static mindspore supported "mindspore.nn.Conv2d"
# the column is the Ascend emitter's: the node runs as a host fallback, and the
# reason still names the dtype its rule excludes
req "Equal on float32: a host fallback, naming the dtype aclnn's rule excludes" equal_f32 ascend host-fallback \
  "dtype float32; the rule allows"

# HTML: one self-contained page that renders in headless Chromium
"$MIGC" coverage "$tv/resnet18_op17_default.onnx" "$work/bad/custom_op.onnx" --force --format html -o "$work/report.html" 2>/dev/null
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
if "$MIGC" coverage "$work/dyn.onnx" --input-shape x=2x3 --force --format json -o "$work/dyn.json" 2>/dev/null &&
   /usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['models'][0]['targets']['cpu']['converted_rate'] == 1.0" "$work/dyn.json"; then
  ok "--input-shape fixes a dynamic batch: the node is converted"
else bad "--input-shape fixes a dynamic batch: the node is converted"; fi
"$MIGC" coverage "$work/dyn.onnx" --input-shape x2x3 > /dev/null 2>&1
[ $? -eq 2 ] && ok "a malformed --input-shape exits 2" || bad "a malformed --input-shape exits 2"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
