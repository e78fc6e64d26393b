#!/bin/bash
# Hostile inputs (issue 16), one class per section, each from files crafted here:
# every one must give exit 2 within 10 s and a one-line diagnostic naming the file
# and the problem, read nothing outside what it was given (a canary file's text
# must appear in no output), and change no existing file.
#   XML: the rules (coverage --rules), the naming rules (weights --rules) and a
#        parity policy (unit test test_parity) with a DTD: quadratic and
#        exponential entity expansion, an external entity naming the canary.
#   External data: a symbolic link beside the model, a linked folder, a FIFO.
#   Deep nesting: graphs in attributes and types in types, 20000 deep.
#   Shapes of 2^120 elements: declared, from Reshape, from Expand.
#   Output out of proportion: stride-0 views of 1 GiB and 4 TiB in tiny .pth files.
#   Zip bombs: many storages (inflated one at a time) and one past 1024:1.
#   Signals: SIGTERM and SIGKILL during a 1 GiB checkpoint, and the run after.
#   Files lost: --map-out over the .pth, the checkpoint or an existing file,
#        coverage -o over the model, outputs "a/b" and "a_b" in run and the runner;
#        the one output rule: convert, run, coverage and weights over existing
#        outputs (refused without --force, nothing changed), an input never replaced.
#   Truncated inputs: a mapped 1 GiB input cut short while it is read (SIGBUS).
#   Smaller ones: opset 99, Concat without axis, a cut safetensors header, and a
#        safetensors or .pth file given as the model (named as what it is).
# usage: tests/e2e/hostile_inputs.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$(realpath "$BUILD/migc")
work=$(mktemp -d "${TMPDIR:-/tmp}/migc-hostile.XXXXXX")
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
canary="CANARY-$$-$RANDOM"
echo "$canary" > "$work/canary.txt"

# expect_refused NAME FILE PATTERN CMD...: exit 2 in 10 s, one error line naming FILE
# and matching PATTERN, the canary nowhere in stdout, stderr or written files
expect_refused() {
  local name=$1 file=$2 pat=$3; shift 3
  local out="$work/$name.out" err="$work/$name.err" start=$SECONDS rc
  timeout 10 "$@" > "$out" 2> "$err"; rc=$?
  local errs; errs=$(grep -c "error" "$err")
  if [ $rc -ne 2 ]; then bad "$name: exit $rc, want 2 ($(tail -1 "$err"))"
  elif [ "$errs" -ne 1 ] || ! grep "error" "$err" | grep -q "$file.*$pat"; then
    bad "$name: want one error naming $file and '$pat', got: $(head -3 "$err")"
  elif grep -rqs "$canary" "$out" "$err" "$work/outputs"; then bad "$name: the canary's text was read"
  else ok "$name (exit 2 in $((SECONDS - start)) s)"; fi
}

# --- XML with a DTD
laughs() { # the exponential form: 10 levels of 10 references
  echo '<?xml version="1.0"?>'
  printf '<!DOCTYPE %s [\n <!ENTITY l0 "lol">\n' "$1"
  for i in 1 2 3 4 5 6 7 8 9; do
    printf ' <!ENTITY l%d "' $i; for _ in 1 2 3 4 5 6 7 8 9 10; do printf '&l%d;' $((i - 1)); done; echo '">'
  done
  echo ']>'
}
quadratic() { # one 100 KB entity referenced 100000 times
  echo '<?xml version="1.0"?>'
  printf '<!DOCTYPE %s [<!ENTITY a "%s">]>\n' "$1" "$(head -c 100000 /dev/zero | tr '\0' a)"
}
mkdir -p "$work/outputs"
{ laughs rules; echo '<rules target="mindspore" version="1"><rule op="Relu" opset="1-"><call api="&l9;"/></rule></rules>'; } > "$work/laughs_rules.xml"
{ quadratic rules; printf '<rules target="mindspore" version="1"><!-- %s --></rules>\n' "$(for _ in $(seq 1000); do printf '&a;'; done)"; } > "$work/quad_rules.xml"
{ echo '<?xml version="1.0"?>'; echo "<!DOCTYPE rules [<!ENTITY x SYSTEM \"file://$work/canary.txt\">]>";
  echo '<rules target="mindspore" version="1"><rule op="Relu" opset="1-"><call api="&x;" kind="function"/></rule></rules>'; } > "$work/xxe_rules.xml"
{ laughs naming; echo '<naming><rename match="&l9;" replace="x"/></naming>'; } > "$work/laughs_naming.xml"
{ echo '<?xml version="1.0"?>'; echo "<!DOCTYPE naming [<!ENTITY x SYSTEM \"file://$work/canary.txt\">]>";
  echo '<naming><rename match="&x;" replace="x"/></naming>'; } > "$work/xxe_naming.xml"
model=samples/tiny_cnn.onnx
for f in laughs_rules quad_rules xxe_rules; do
  expect_refused "coverage --rules $f" "$f.xml" "DOCTYPE is not accepted" \
    "$MIGC" coverage "$model" --rules "$work/$f.xml" -o "$work/outputs/$f.md"
done
for f in laughs_naming xxe_naming; do
  expect_refused "weights --rules $f" "$f.xml" "DOCTYPE is not accepted" \
    "$MIGC" weights "$model" --rules "$work/$f.xml" -o "$work/outputs/$f.ckpt"
done

# --- external data that leaves the model's folder: a symbolic link to the canary,
# a linked folder, and a FIFO (which once hung the import)
ext=$work/ext outside=$work/outside
mkdir -p "$ext" "$outside"
printf '%-32.32s' "$canary" > "$outside/w.bin" # 8 float32s of canary text
/usr/bin/python3 - "$ext" <<'PY' || { echo "fixture failed"; exit 1; }
import sys, onnx
from onnx import TensorProto, helper
d = sys.argv[1]
for name, location in (("link", "w.bin"), ("linkdir", "sub/w.bin"), ("fifo", "fifo.bin"),
                       ("plain", "data/w.bin")):
    w = helper.make_tensor("w", TensorProto.FLOAT, [8], [0.0] * 8)
    w.ClearField("float_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "32")):
        e = w.external_data.add(); e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "%s/%s.onnx" % (d, name))
PY
ln -s "$outside/w.bin" "$ext/w.bin"
ln -s "$outside" "$ext/sub"
mkfifo "$ext/fifo.bin"
for m in link linkdir; do
  expect_refused "external data through a symlink ($m)" "w.bin" "symbolic link" \
    "$MIGC" weights "$ext/$m.onnx" -o "$work/outputs/$m.ckpt"
done
expect_refused "external data that is a FIFO" "fifo.bin" "not a regular file" \
  "$MIGC" weights "$ext/fifo.onnx" -o "$work/outputs/fifo.ckpt"
# the control: the same model with its data in a real subfolder loads
mkdir -p "$ext/data" && head -c 32 /dev/zero > "$ext/data/w.bin"
if "$MIGC" weights "$ext/plain.onnx" -o "$work/outputs/plain.ckpt" > "$work/plain.log" 2>&1; then
  ok "external data in a subfolder of the model's folder still loads"
else bad "external data in a subfolder: $(tail -1 "$work/plain.log")"; fi
expect_refused "inspect of external data through a symlink" "w.bin" "symbolic link" "$MIGC" inspect --json "$ext/link.onnx"

# --- deep nesting: If nodes whose then_branch holds an If, 20000 deep (about 400 KB;
# protobuf-c's recursive decoding once overflowed the stack on it), and a type
# nested 20000 deep (sequence of sequence of ...)
/usr/bin/python3 - "$work" <<'PY' || { echo "fixture failed"; exit 1; }
import sys
def varint(v):
    out = bytearray()
    while True:
        out.append((v & 0x7f) | (0x80 if v > 0x7f else 0)); v >>= 7
        if not v: return bytes(out)
def field(num, body): return varint(num << 3 | 2) + varint(len(body)) + body
parts, size = [], 0
for _ in range(20000):
    for prefix, key in ((field(1, b"then_branch") + varint(20 << 3) + varint(5), 6),  # Attr.g
                        (field(4, b"If"), 5),                                           # Node.attribute
                        (b"", 1)):                                                      # Graph.node
        head = prefix + varint(key << 3 | 2) + varint(size)
        parts.append(head); size += len(head)
graph = b"".join(reversed(parts))
model = varint(1 << 3) + varint(8) + field(8, varint(2 << 3) + varint(17)) + field(7, graph)
open(sys.argv[1] + "/deep_graph.onnx", "wb").write(model)
# ValueInfo{name(1) "x", type(2): Type{sequence_type(4): Seq{elem_type(1): Type{...}}}}
parts, size = [], 0
for _ in range(20000):
    for key in (1, 4):
        head = varint(key << 3 | 2) + varint(size); parts.append(head); size += len(head)
vi = field(1, b"x") + varint(2 << 3 | 2) + varint(size) + b"".join(reversed(parts))
g = field(11, vi) + field(2, b"g")
open(sys.argv[1] + "/deep_type.onnx", "wb").write(varint(1 << 3) + varint(8) + field(8, varint(2 << 3) + varint(17)) + field(7, g))
PY
for m in deep_graph deep_type; do
  expect_refused "$m: inspect" "$m.onnx" "nest deeper than 200" "$MIGC" inspect "$work/$m.onnx"
  expect_refused "$m: convert" "$m.onnx" "nest deeper than 200" "$MIGC" convert "$work/$m.onnx" -o "$work/outputs/$m"
done

# --- shapes whose element count overflows: declared on an input, made by Reshape and
# by Expand from constants (2^120 elements each; 2^40 is the largest dim accepted)
/usr/bin/python3 - "$work" <<'PY' || { echo "fixture failed"; exit 1; }
import sys, onnx
from onnx import TensorProto as T, helper
d, B = sys.argv[1], 2 ** 40
f = lambda n, s: helper.make_tensor_value_info(n, T.FLOAT, s)
save = lambda g, n: onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "%s/%s.onnx" % (d, n))
save(helper.make_graph([helper.make_node("Relu", ["a"], ["y"], name="r")], "g", [f("a", [B, B, B])], [f("y", [B, B, B])]), "huge_input")
for op, n in (("Reshape", 4), ("Expand", 1)):
    save(helper.make_graph([helper.make_node(op, ["a", "s"], ["y"], name="n")], "g", [f("a", [n])], [f("y", None)],
                           [helper.make_tensor("s", T.INT64, [3], [B, B, B])]), "huge_" + op.lower())
PY
for m in huge_input huge_reshape huge_expand; do
  expect_refused "$m: inspect" "$m.onnx" "more than 2^59 elements" "$MIGC" inspect "$work/$m.onnx"
  expect_refused "$m: convert" "$m.onnx" "more than 2^59 elements" "$MIGC" convert "$work/$m.onnx" -o "$work/outputs/$m"
done

# --- output out of all proportion: .pth files of a few hundred bytes whose tensor is a
# stride-0 view of 2^28 (1 GiB) and 2^40 (4 TiB) elements; a 4 MB one still converts,
# with the expanded view reported
/usr/bin/python3 - "$work" <<'PY' || { echo "fixture failed"; exit 1; }
import sys, torch
for name, n in (("view_1g", 2 ** 28), ("view_4t", 2 ** 40), ("view_4m", 2 ** 20)):
    torch.save({"w": torch.zeros(1).expand(n)}, "%s/%s.pth" % (sys.argv[1], name))
PY
for v in view_1g view_4t; do
  expect_refused "$v: a small .pth expanding past the output limit" "$v.pth" "over the .*-byte limit" \
    "$MIGC" weights "$work/$v.pth" -o "$work/outputs/$v.ckpt"
done
expect_refused "view_4t with the limit raised: more than the disk holds" "view_4t.ckpt" "free" \
  "$MIGC" weights "$work/view_4t.pth" -o "$work/outputs/view_4t.ckpt" --max-output-bytes 100T
if ls "$work/outputs" | grep -q "view_"; then bad "a refused checkpoint left a file: $(ls "$work/outputs" | grep view_)"
else ok "no refused checkpoint left a file"; fi
if "$MIGC" weights "$work/view_4m.pth" -o "$work/view_4m.ckpt" > "$work/view_4m.log" 2>&1 &&
   grep -q "view_4m.pth: warning.*'w': an expanded view: 1048576 elements over 1 stored" "$work/view_4m.log"; then
  ok "a 4 MB expanded view converts, reported as one"
else bad "view_4m: $(tail -2 "$work/view_4m.log")"; fi

# --- zip bombs: five deflated storages of 64 MiB of zeros (a 320 KB .pth), inflated one
# at a time; and one storage of 320 MiB deflated past 1024:1
/usr/bin/python3 - "$work" <<'PY' || { echo "fixture failed"; exit 1; }
import os, sys, torch, zipfile
d = sys.argv[1]
for name, sd in (("bomb5", {"w%d" % i: torch.zeros(16 << 20) for i in range(5)}),
                 ("bomb1", {"w": torch.zeros(80 << 20)})):
    plain = "%s/%s_stored.pth" % (d, name)
    torch.save(sd, plain)
    with zipfile.ZipFile(plain) as zin, zipfile.ZipFile("%s/%s.pth" % (d, name), "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, zin.read(item.filename))
    os.remove(plain)
PY
expect_refused "zip bomb: 320 MiB from 320 KB, past the output limit" "bomb5.pth" "over the .*-byte limit" \
  "$MIGC" weights "$work/bomb5.pth" -o "$work/outputs/bomb5.ckpt"
# (ASan's quarantine would keep the freed storages: off for this RSS check)
if ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0 /usr/bin/time -f %M -o "$work/bomb5.rss" "$MIGC" weights "$work/bomb5.pth" -o "$work/bomb5.ckpt" \
     --max-output-bytes 1G > "$work/bomb5.log" 2>&1 && [ "$(tail -1 "$work/bomb5.rss")" -lt 200000 ]; then
  ok "zip bomb with the limit raised: written with one storage inflated at a time ($(tail -1 "$work/bomb5.rss") KiB RSS)"
else bad "zip bomb with the limit raised: $(tail -1 "$work/bomb5.log"), $(tail -1 "$work/bomb5.rss") KiB RSS"; fi
rm -f "$work/bomb5.ckpt"
expect_refused "zip bomb: one storage past 1024:1" "bomb1.pth" "refused as a zip bomb" \
  "$MIGC" weights "$work/bomb1.pth" -o "$work/outputs/bomb1.ckpt" --max-output-bytes 1G

# --- signals: a 1 GiB `migc weights` killed with SIGTERM, then with SIGKILL, as soon
# as its temporary file appears: the final name stays absent, SIGTERM leaves no
# temporary, and the next run sweeps SIGKILL's and succeeds
/usr/bin/python3 -c "import sys, torch; torch.save({'w': torch.ones(256 << 20)}, sys.argv[1])" "$work/big.pth" ||
  { echo "fixture failed"; exit 1; }
killed_run() { # SIGNAL: starts the conversion, signals it once its temporary exists; prints the exit status
  "$MIGC" weights "$work/big.pth" -o "$work/sig/big.ckpt" --max-output-bytes 2G > /dev/null 2>&1 &
  local pid=$! i
  for i in $(seq 500); do compgen -G "$work/sig/.big.ckpt.tmp-*" > /dev/null && break; sleep 0.01; done
  kill -"$1" $pid; wait $pid; echo $?
}
mkdir -p "$work/sig"
st=$(killed_run TERM)
if [ "$st" = 143 ] && [ ! -e "$work/sig/big.ckpt" ] && ! compgen -G "$work/sig/.big.ckpt.tmp-*" > /dev/null; then
  ok "SIGTERM during a 1 GiB checkpoint: died of the signal, no final file, no temporary left"
else bad "SIGTERM: exit $st; left: $(ls -A "$work/sig")"; fi
st=$(killed_run KILL)
left=$(compgen -G "$work/sig/.big.ckpt.tmp-*" | wc -l)
if [ "$st" = 137 ] && [ ! -e "$work/sig/big.ckpt" ]; then ok "SIGKILL: no final file ($left temporary left, as SIGKILL must)"
else bad "SIGKILL: exit $st; left: $(ls -A "$work/sig")"; fi
if "$MIGC" weights "$work/big.pth" -o "$work/sig/big.ckpt" --max-output-bytes 2G > "$work/sig.log" 2>&1 &&
   [ -s "$work/sig/big.ckpt" ] && [ "$(ls -A "$work/sig")" = big.ckpt ]; then
  ok "the next run succeeds and sweeps the killed run's temporary"
else bad "the run after the kills: $(tail -1 "$work/sig.log"); left: $(ls -A "$work/sig")"; fi
rm -rf "$work/sig" "$work/big.pth"

# --- outputs that would replace a file: --map-out naming the source .pth, the
# checkpoint's own path or an existing file, and coverage -o naming the model;
# each is refused (exit 2) and the file keeps its bytes
mkdir -p "$work/lost"
cp samples/tiny_cnn.pth samples/tiny_cnn.onnx "$work/lost/" && echo '{"kept": 1}' > "$work/lost/old.json"
sums() { sha256sum "$work/lost/tiny_cnn.pth" "$work/lost/tiny_cnn.onnx" "$work/lost/old.json"; }
before=$(sums)
refused_plain() { # NAME PATTERN CMD...: exit 2 with PATTERN on stderr
  local name=$1 pat=$2; shift 2
  timeout 10 "$@" > "$work/lost.out" 2> "$work/lost.err"; local rc=$?
  if [ $rc -eq 2 ] && grep -q "$pat" "$work/lost.err"; then ok "$name (exit 2)"
  else bad "$name: exit $rc: $(head -2 "$work/lost.err")"; fi
}
refused_plain "--map-out naming the source .pth" "refusing to overwrite" \
  "$MIGC" weights "$work/lost/tiny_cnn.pth" -o "$work/lost/a.ckpt" --map-out "$work/lost/tiny_cnn.pth"
refused_plain "--map-out naming the checkpoint being written" "the checkpoint's own path" \
  "$MIGC" weights "$work/lost/tiny_cnn.pth" -o "$work/lost/b.ckpt" --map-out "$work/lost/b.ckpt"
refused_plain "--map-out naming an existing file without --force" "exists; --force replaces it" \
  "$MIGC" weights "$work/lost/tiny_cnn.pth" -o "$work/lost/c.ckpt" --map-out "$work/lost/old.json"
refused_plain "coverage -o naming the model" "refusing to write the report over it" \
  "$MIGC" coverage "$work/lost/tiny_cnn.onnx" -o "$work/lost/../lost/tiny_cnn.onnx"
[ "$(sums)" = "$before" ] && ok "the .pth, the model and the existing map keep their bytes" ||
  bad "a refused output changed an input: $(sums)"
# two graph outputs whose safe names collide ("a/b" and "a_b"): run and the runner
# write both, to distinct files, and output_names.json says which is which
/usr/bin/python3 - "$work/lost" <<'PY' || { echo "fixture failed"; exit 1; }
import sys, numpy as np, onnx
from onnx import TensorProto as T, helper
d = sys.argv[1]
f = lambda n: helper.make_tensor_value_info(n, T.FLOAT, [3])
g = helper.make_graph([helper.make_node("Relu", ["x"], ["a/b"], name="r"), helper.make_node("Neg", ["x"], ["a_b"], name="n")],
                      "g", [f("x")], [f("a/b"), f("a_b")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d + "/twins.onnx")
np.save(d + "/x.npy", np.array([-1, 2, -3], np.float32))
PY
twins_ok() { # DIR: both outputs there, with their own values, and the map naming them
  /usr/bin/python3 - "$1" <<'PY'
import json, sys, numpy as np
d = sys.argv[1]
names = json.load(open(d + "/output_names.json"))
assert names == {"a/b": "a_b.npy", "a_b": "a_b-1.npy"}, names
assert np.load(d + "/" + names["a/b"]).tolist() == [0, 2, 0]
assert np.load(d + "/" + names["a_b"]).tolist() == [1, -2, 3]
PY
}
if "$MIGC" run "$work/lost/twins.onnx" --input x="$work/lost/x.npy" --output-dir "$work/lost/run" > /dev/null 2>&1 &&
   twins_ok "$work/lost/run"; then ok "run: outputs a/b and a_b go to distinct files, output_names.json maps them"
else bad "run: colliding output names: $(ls "$work/lost/run" 2>&1)"; fi
if "$MIGC" convert "$work/lost/twins.onnx" --cpu-only -o "$work/lost/conv" > /dev/null 2>&1 &&
   make -s -C "$work/lost/conv/cpu" > /dev/null 2>&1 &&
   "$work/lost/conv/cpu/runner" --input x="$work/lost/x.npy" --output-dir "$work/lost/crun" > /dev/null 2>&1 &&
   twins_ok "$work/lost/crun"; then ok "the generated runner does the same"
else bad "runner: colliding output names: $(ls "$work/lost/crun" 2>&1)"; fi

# --- one output rule for every command: an existing output needs --force, an input is
# never replaced (not even with --force), and a refusal changes no file. convert into a
# folder holding an earlier conversion refuses before writing anything.
tree_sums() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs sha256sum); }
rule=$work/rule
mkdir -p "$rule" && cp samples/tiny_cnn.onnx samples/tiny_cnn.pth samples/tiny_cnn_input.npy "$rule/"
if "$MIGC" convert "$rule/tiny_cnn.onnx" --weights "$rule/tiny_cnn.pth" --input-shape input=1x3x32x32 \
     --target cpu,mindspore,ascend -o "$rule/out" > "$rule/first.log" 2>&1; then
  ok "convert into a new folder, every target: no two outputs share a name"
else bad "convert into a new folder: $(grep -m1 error "$rule/first.log")"; fi
echo "mine" > "$rule/out/cpu/notes.txt" # a file of the user's inside an output folder
before=$(tree_sums "$rule")
expect_refused "convert -o over an earlier conversion, without --force" "rule/out" \
  "holds cpu/, convert.json, model.ckpt, .* of an earlier conversion; --force replaces" \
  "$MIGC" convert "$rule/tiny_cnn.onnx" --weights "$rule/tiny_cnn.pth" --input-shape input=1x3x32x32 \
  --target cpu,mindspore,ascend -o "$rule/out"
expect_refused "convert --cpu-only -o over an earlier conversion" "rule/out" "holds cpu/, convert.json of an earlier" \
  "$MIGC" convert "$rule/tiny_cnn.onnx" --cpu-only -o "$rule/out"
"$MIGC" run "$rule/tiny_cnn.onnx" --input input="$rule/tiny_cnn_input.npy" --output-dir "$rule/run" > /dev/null 2>&1
"$MIGC" coverage "$rule/tiny_cnn.onnx" -o "$rule/cov.md" > /dev/null 2>&1
before=$(tree_sums "$rule")
expect_refused "run --output-dir over an earlier output" "logits.npy" "exists; --force replaces it" \
  "$MIGC" run "$rule/tiny_cnn.onnx" --input input="$rule/tiny_cnn_input.npy" --output-dir "$rule/run"
expect_refused "coverage -o over an existing file" "cov.md" "exists; --force replaces it" \
  "$MIGC" coverage "$rule/tiny_cnn.onnx" -o "$rule/cov.md"
expect_refused "weights -o over an existing checkpoint" "model.ckpt" "exists; --force replaces it" \
  "$MIGC" weights "$rule/tiny_cnn.pth" -o "$rule/out/model.ckpt"
cp "$rule/tiny_cnn_input.npy" "$rule/run/input.npy" && before=$(tree_sums "$rule")
/usr/bin/python3 - "$rule" <<'PY' || { echo "fixture failed"; exit 1; }
import sys, onnx
from onnx import TensorProto as T, helper
f = lambda n: helper.make_tensor_value_info(n, T.FLOAT, [1, 3, 32, 32])
g = helper.make_graph([helper.make_node("Relu", ["x"], ["input"], name="r")], "g", [f("x")], [f("input")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1] + "/relu.onnx")
PY
before=$(tree_sums "$rule")
expect_refused "run --force: an output named like its input file" "input.npy" "is an input of this run" \
  "$MIGC" run "$rule/relu.onnx" --input x="$rule/run/input.npy" --output-dir "$rule/run" --force
[ "$(tree_sums "$rule")" = "$before" ] && ok "no refusal changed a file (the user's own file in cpu/ included)" ||
  bad "a refused output changed a file: $(diff <(echo "$before") <(tree_sums "$rule") | head -3)"
if compgen -G "$rule/out/.*.tmp-*" > /dev/null || compgen -G "$rule/out/*/.*.tmp-*" > /dev/null; then
  bad "a refusal left a temporary file"; else ok "no refusal left a temporary file"; fi
if "$MIGC" convert "$rule/tiny_cnn.onnx" --weights "$rule/tiny_cnn.pth" --input-shape input=1x3x32x32 \
     --target cpu,mindspore,ascend -o "$rule/out" --force > "$rule/force.log" 2>&1 &&
   [ "$(cat "$rule/out/cpu/notes.txt")" = mine ] && make -s -C "$rule/out/cpu" > /dev/null 2>&1; then
  ok "convert --force replaces what it writes (and keeps the user's file), the project builds"
else bad "convert --force: $(grep -m1 error "$rule/force.log")"; fi

# --- an input truncated while migc reads it (mapped: SIGBUS without a handler): a 1 GiB
# safetensors file is cut to 100 MB once the checkpoint's temporary file exists. The run
# is stopped (SIGSTOP) while the file is cut, so the cut lands before the read ends
# whatever the machine's speed: exit 2, one error naming the file, no output, nothing left.
/usr/bin/python3 - "$work/cut1g.safetensors" <<'PY' || { echo "fixture failed"; exit 1; }
import json, struct, sys
n = 256 << 20  # float32 elements, 1 GiB (a sparse file: no disk used until written)
h = json.dumps({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h))); f.write(h); f.truncate(8 + len(h) + 4 * n)
PY
truncated_run() { # NAME ARGS...: migc weights on the 1 GiB file, cut to 100 MB while it runs
  local name=$1 start=$SECONDS; shift
  local src=$work/trunc.safetensors out=$work/trunc/w.ckpt i
  rm -rf "$work/trunc" && mkdir -p "$work/trunc" && cp --sparse=always "$work/cut1g.safetensors" "$src"
  "$MIGC" weights "$src" -o "$out" --max-output-bytes 2G "$@" > "$work/trunc.out" 2> "$work/trunc.err" &
  local pid=$!
  for i in $(seq 1000); do compgen -G "$work/trunc/.w.ckpt.tmp-*" > /dev/null && break; sleep 0.01; done
  kill -STOP $pid && truncate -s 100M "$src" && kill -CONT $pid
  wait $pid; local rc=$?
  if [ $rc -ne 2 ]; then bad "$name: exit $rc, want 2 ($(tail -1 "$work/trunc.err"))"
  elif [ "$(grep -c error "$work/trunc.err")" -ne 1 ] || ! grep -q "trunc.safetensors: error.*was truncated while migc was reading it" "$work/trunc.err"; then
    bad "$name: want one error naming the file and the truncation, got: $(head -3 "$work/trunc.err")"
  elif [ -n "$(ls -A "$work/trunc")" ]; then bad "$name: left $(ls -A "$work/trunc")"
  else ok "$name: exit 2 in $((SECONDS - start)) s, the file named, no output, nothing left"; fi
}
truncated_run "an input truncated while mapped (copied to the checkpoint as it is)"
truncated_run "an input truncated while mapped (converted to fp16)" --dtype fp16
rm -f "$work/cut1g.safetensors" "$work/trunc.safetensors"

# --- the smaller ones: an opset from the future, a Concat with no axis, and files of
# another format, which are named as what they are
/usr/bin/python3 - "$work" <<'PY' || { echo "fixture failed"; exit 1; }
import sys, onnx
from onnx import TensorProto as T, helper
d = sys.argv[1]
f = lambda n, s: helper.make_tensor_value_info(n, T.FLOAT, s)
g = helper.make_graph([helper.make_node("Concat", ["a", "b"], ["y"], name="cat")], "g", [f("a", [2]), f("b", [2])], [f("y", [4])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d + "/noaxis.onnx")
g = helper.make_graph([helper.make_node("Relu", ["a"], ["y"], name="r")], "g", [f("a", [2])], [f("y", [2])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 99)]), d + "/opset99.onnx")
open(d + "/cut.safetensors", "wb").write((200).to_bytes(8, "little") + b'{"w": {"dtype": "F32", "sha')
PY
expect_refused "opset 99" "opset99.onnx" "opset 99" "$MIGC" convert "$work/opset99.onnx" -o "$work/outputs/o99"
expect_refused "Concat without axis" "noaxis.onnx" "requires the attribute 'axis'" "$MIGC" inspect "$work/noaxis.onnx"
expect_refused "a cut safetensors header" "cut.safetensors" "safetensors header length" \
  "$MIGC" weights "$work/cut.safetensors" -o "$work/outputs/cut.ckpt"
expect_refused "a safetensors file given as the model" "cut.safetensors" "this is a safetensors file" \
  "$MIGC" inspect "$work/cut.safetensors"
expect_refused "a .pth given as the model" "tiny_cnn.pth" "this is a zip archive" "$MIGC" inspect samples/tiny_cnn.pth

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && rm -rf "$work"
[ $fail -eq 0 ]
