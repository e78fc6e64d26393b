#!/bin/bash
# migc convert --target mindspore: the deployment files beside net.py and the ModelArts
# package (codegen/mindspore/emit_package.c), checked without MindSpore, ModelArts,
# converter_lite or atc:
#  - config.json validates against tests/fixtures/modelarts_config.schema.json (facts.md
#    1.2's tables), broken copies do not, its request/response schemas are the ONNX
#    graph's inputs and outputs (tiny_cnn; two inputs with a symbolic dim);
#  - customize_service.py, driven through the ModelArts and MindSpore stand-ins, answers
#    a right request with torch's logits (1e-4 x max) and a wrong shape or dtype with a
#    400 naming the input, the expected shape and dtype and what was sent;
#  - export.py gets as far as the stand-in goes: mindspore.export is not implemented;
#  - convert_lite.sh and atc.sh run stand-in tools that record what they were given:
#    facts.md 1.5/1.6's command lines with the ONNX graph's names and shapes;
#  - every generated .py passes pyflakes3; the README's training step trains;
#  - hostile input names: every file still parses, and nothing they name is run;
#  - --model-algorithm and --modelarts-runtime reach config.json, bad values exit 2
#    before anything is written.
# usage: tests/e2e/mindspore_package.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
ROOT=$PWD
MIGC=$ROOT/$BUILD/migc
PY=/usr/bin/python3
CHECK="$PY $ROOT/tests/fixtures/check_ms_package.py"
CALL="$PY $ROOT/tests/fixtures/modelarts_call.py"
STANDIN=$ROOT/tests/mindspore_standin
work=$(mktemp -d "${TMPDIR:-/tmp}/migc-mspkg.XXXXXX")
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
checked() { # LABEL command...: every line of a check_ms_package.py run counted
  local out rc
  out=$("${@:2}" 2>&1); rc=$?
  while IFS= read -r line; do
    case $line in ok*) ok "$1: ${line#ok   }";; FAIL*) bad "$1: ${line#FAIL }";; *) [ -n "$line" ] && echo "     $line";; esac
  done <<< "$out"
  [ $rc -eq 0 ] || grep -q '^FAIL' <<< "$out" || bad "$1: exit $rc"
}

$PY tests/fixtures/make_ms_package_models.py "$work/m" || { echo "fixtures failed"; exit 1; }
mkdir -p "$work/run" "$work/bin"
convert() { # NAME ONNX [PTH] [flags...]: convert for mindspore into $work/NAME
  local name=$1 onnx=$2 pth=${3:-}
  shift 3 2>/dev/null || shift $#
  (cd "$work/run" && "$MIGC" convert "$onnx" ${pth:+--weights "$pth"} --target mindspore -o "$work/$name" "$@" \
    > "$work/$name.log" 2>&1)
}
convert tiny "$ROOT/samples/tiny_cnn_preserve.onnx" "$ROOT/samples/tiny_cnn.pth" || bad "tiny: convert: $(tail -2 "$work/tiny.log")"
convert two "$work/m/two_inputs.onnx" || bad "two_inputs: convert: $(tail -2 "$work/two.log")"
convert hostile "$work/m/hostile.onnx" "$ROOT/samples/tiny_cnn.pth" || bad "hostile: convert: $(tail -2 "$work/hostile.log")"
convert quotes "$work/m/hostile_quotes.onnx" "$ROOT/samples/tiny_cnn.pth" || bad "quotes: convert: $(tail -2 "$work/quotes.log")"

# --- the files
for n in tiny two hostile quotes; do
  missing=
  for f in mindspore/export.py mindspore/README.md mindspore/converter_lite.cfg mindspore/convert_lite.sh \
           mindspore/atc.sh modelarts/model/config.json modelarts/model/customize_service.py \
           modelarts/model/net.py modelarts/model/tmp.om; do
    [ -f "$work/$n/$f" ] || missing="$missing $f"
  done
  [ -z "$missing" ] && ok "$n: export.py, README.md, the Lite and ATC files and the ModelArts package are written" ||
    bad "$n: missing$missing"
done
if [ ! -s "$work/tiny/modelarts/model/tmp.om" ] && cmp -s "$work/tiny/mindspore/net.py" "$work/tiny/modelarts/model/net.py" &&
   [ "$(stat -c %i "$work/tiny/model.ckpt")" = "$(stat -c %i "$work/tiny/modelarts/model/model.ckpt")" ]; then
  ok "tiny: the package's tmp.om is empty, net.py a copy, model.ckpt a hard link to the checkpoint"
else bad "tiny: tmp.om, net.py or model.ckpt of the package"; fi
if [ ! -e "$work/two/modelarts/model/model.ckpt" ] && grep -q "no parameters, so the ModelArts package has no .ckpt" "$work/two.log"; then
  ok "two_inputs (no parameters): no checkpoint in the package, and a warning says ModelArts calls it mandatory"
else bad "two_inputs: package checkpoint or its warning"; fi

# a dtype the package cannot carry: said, nothing of the package written; --strict exits 2
if convert bf16 "$work/m/bf16_input.onnx" && grep -q "error\[unsupported-dtype\].*graph input of dtype bfloat16" "$work/bf16.log" &&
   [ ! -e "$work/bf16/modelarts/model/config.json" ] && [ ! -e "$work/bf16/mindspore/export.py" ]; then
  ok "a bfloat16 input: reported, no package written, convert still exits 0"
else bad "bfloat16 input: $(grep -m2 'bfloat16\|error' "$work/bf16.log")"; fi
convert bf16s "$work/m/bf16_input.onnx" "" --strict
[ $? -eq 2 ] && ok "... and --strict --target mindspore exits 2 on it" || bad "bfloat16 input with --strict did not exit 2"

# --- config.json
checked "tiny config.json" $CHECK config "$work/tiny" "$ROOT/samples/tiny_cnn_preserve.onnx"
checked "two_inputs config.json" $CHECK config "$work/two" "$work/m/two_inputs.onnx"
checked "quotes config.json" $CHECK config "$work/quotes" "$work/m/hostile_quotes.onnx"

# --- customize_service.py through the stand-ins
$PY - "$work/req" "$ROOT/samples/tiny_cnn_input.npy" <<'EOF'
import json, os, sys
import numpy as np
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
x = np.load(sys.argv[2])
req = {"ok": {"input": x.tolist()}, "shape": {"input": x[:, :, :31].tolist()}, "dtype": {"input": (x > 0).tolist()},
       "ragged": {"input": [[[[1.0, 2.0], [3.0]]]]}, "names": {"image": x.tolist()},
       "two_ok": {"x": [[1.0, -2, 3, -4], [0.5, 0.5, -1, 2]], "ids": [[1, 2, 3, 4], [5, 6, 7, 8]]},
       "two_dtype": {"x": [[1.0, -2, 3, -4], [0.5, 0.5, -1, 2]], "ids": [[1.5, 2, 3, 4], [5, 6, 7, 8]]},
       "two_batch": {"x": [[1.0, -2, 3, -4], [0.5, 0.5, -1, 2]], "ids": [[1, 2, 3, 4]]}}
for k, v in req.items():
    with open(os.path.join(d, k + ".json"), "w") as f:
        json.dump(v, f)
EOF
service() { # PKG REQUEST...: one answer per line in $work/answers
  (cd "$work/run" && $CALL "$1" "${@:2}") > "$work/answers" 2> "$work/answers.err"
}
verdicts() { # CHECK...: judge $work/answers, one CHECK per answer, with the Python below
  $PY - "$work/answers" "$@" <<'EOF'
import json, sys
import numpy as np
answers = [json.loads(line) for line in open(sys.argv[1])]
checks = sys.argv[2:]
for a, c in zip(answers, checks):
    kind, _, arg = c.partition(":")
    body = a.get("body", {})
    if kind == "logits":
        ref = np.load(arg)
        y = np.array(body.get("logits", []), dtype=np.float32) if a["status"] == 200 else None
        if y is None or y.shape != ref.shape:
            print("FAIL right request: status %s, %s" % (a["status"], str(body)[:200]))
            continue
        err = float(np.abs(y - ref).max() / np.abs(ref).max())
        print(("ok   " if err <= 1e-4 else "FAIL ") + "right request: 200, logits within %.1e of max|torch|" % err)
    elif kind == "two":
        x = np.array([[1.0, -2, 3, -4], [0.5, 0.5, -1, 2]], np.float32)
        ids = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float32)
        want = {"y": (np.maximum(x, 0) + ids).tolist(), "r": np.maximum(x, 0).tolist()}
        good = a["status"] == 200 and body == want
        print(("ok   " if good else "FAIL ") + "two inputs, batch 2: %s %s" % (a["status"], str(body)[:200]))
    else:  # 400:WORD|WORD... every word in the message
        msg = body.get("error_msg", "")
        words = arg.split("|")
        good = a["status"] == 400 and all(w in msg for w in words)
        print(("ok   " if good else "FAIL ") + "%s: %s %s" % (kind, a["status"], msg[:240]))
if len(answers) != len(checks):
    print("FAIL %d answers for %d requests" % (len(answers), len(checks)))
EOF
}
judge() { # LABEL PKG REQUEST:CHECK...
  local label=$1 pkg=$2 reqs=() checks=() x
  for x in "${@:3}"; do reqs+=("$work/req/${x%%=*}.json"); checks+=("${x#*=}"); done
  service "$pkg" "${reqs[@]}" || { bad "$label: modelarts_call.py: $(tail -1 "$work/answers.err")"; return; }
  while IFS= read -r line; do
    case $line in ok*) ok "$label: ${line#ok   }";; *) bad "$label: ${line#FAIL }";; esac
  done < <(verdicts "${checks[@]}")
}
judge "tiny service" "$work/tiny/modelarts/model" "ok=logits:$ROOT/samples/tiny_cnn_logits.npy" \
  "shape=wrong shape:input 'input'|expected shape [1, 3, 32, 32] and dtype float32|got shape [1, 3, 31, 32]" \
  "dtype=wrong dtype:input 'input'|expected shape [1, 3, 32, 32] and dtype float32|got shape [1, 3, 32, 32] and dtype bool" \
  "ragged=ragged lists:input 'input'|unequal lengths" "names=wrong name:missing ['input']|unknown ['image']"
judge "two_inputs service" "$work/two/modelarts/model" "two_ok=two" \
  "two_dtype=float ids:input 'ids'|expected shape [batch, 4] and dtype int64|got shape [2, 4] and dtype float64" \
  "two_batch=batch disagreeing:input 'ids'|got shape [1, 4]|batch is 2 in an earlier input"
# the check can fail: a service that skips the shape check answers the wrong shape, and is caught
mkdir -p "$work/mutant" && cp -r "$work/tiny/modelarts/model" "$work/mutant/" &&
  sed -i 's/    if why is not None:/    if False:/' "$work/mutant/model/customize_service.py"
service "$work/mutant/model" "$work/req/shape.json"
if verdicts "wrong shape:input 'input'|got shape [1, 3, 31, 32]" | grep -q '^FAIL'; then
  ok "a service that does not check shapes fails the wrong-shape check"
else bad "the wrong-shape check passed a service that does not check shapes"; fi

# --- export.py: the stand-in implements no mindspore.export (mindspore-api.json lists it)
exported() { # LABEL WANT OUTDIR ARGS...: export.py's last line is WANT
  local r; r=$(cd "$work/run" && PYTHONPATH=$STANDIN $PY "$3/mindspore/export.py" "${@:4}" 2>&1)
  if [[ $(tail -1 <<< "$r") == "$2" ]]; then ok "$1"; else bad "$1: $(tail -2 <<< "$r")"; fi
  last_export=$r
}
NOEXPORT="NotImplementedError: mindspore.export is listed in mindspore-api.json but the MindSpore stand-in does not implement it (tests/mindspore_standin; see docs/mindspore-standin.md)"
for f in MINDIR AIR; do
  exported "tiny export.py --format $f: checkpoint loaded, then the stand-in's mindspore.export raises NotImplementedError" \
    "$NOEXPORT" "$work/tiny" --format $f
  grep -q "^export.py: $f to " <<< "$last_export" || bad "tiny export.py --format $f did not reach mindspore.export"
done
exported "two_inputs export.py --dim batch=2: static example inputs reach mindspore.export" "$NOEXPORT" "$work/two" --dim batch=2
r=$(cd "$work/run" && PYTHONPATH=$STANDIN $PY "$work/two/mindspore/export.py" 2>&1 | tail -1)
[[ $r == NotImplementedError:*"placeholder Tensor"* ]] &&
  ok "two_inputs export.py: a symbolic dim asks for a placeholder Tensor, which the stand-in does not settle" ||
  bad "two_inputs export.py without --dim: $r"
r=$(cd "$work/run" && PYTHONPATH=$STANDIN $PY "$work/two/mindspore/export.py" --dim seq=2 2>&1 | tail -1)
[[ $r == *"--dim 'seq=2'"*"['batch']"* ]] && ok "export.py --dim with a dim the graph lacks: refused, naming the graph's" ||
  bad "export.py --dim seq=2: $r"

# --- pyflakes3 on every generated .py
pyfiles=()
for n in tiny two hostile quotes; do pyfiles+=("$work/$n"/mindspore/*.py "$work/$n"/modelarts/model/*.py); done
if pyflakes3 "${pyfiles[@]}" > "$work/flakes" 2>&1; then ok "pyflakes3: ${#pyfiles[@]} generated .py files, no warning"
else bad "pyflakes3: $(head -3 "$work/flakes")"; fi

# --- the README's training step trains, through the stand-in
r=$(cd "$work/tiny/mindspore" && PYTHONPATH=$STANDIN:. $PY - "$ROOT/samples/tiny_cnn_input.npy" <<'EOF' 2>&1 | tail -1
import re, sys
import numpy as np
code = re.search(r"```python\n(.*?)```", open("README.md").read(), re.S).group(1)
ns = {}
exec(compile(code, "README.md", "exec"), ns)
import mindspore
x = mindspore.Tensor(np.load(sys.argv[1]))
target = mindspore.Tensor(np.zeros((1, 10), np.float32))
losses = [float(ns["train_step"](target, x).asnumpy()) for _ in range(3)]
print(("ok" if losses[2] < losses[1] < losses[0] else "FAIL") + " losses %s" % losses)
EOF
)
[[ $r == ok* ]] && ok "README.md's value_and_grad training step lowers the loss: ${r#ok }" || bad "README training step: $r"

# --- converter_lite and atc: stand-in tools record their arguments (NUL-separated)
cat > "$work/bin/converter_lite" <<'EOF'
#!/bin/bash
printf '%s\0' "$@" > "$FAKE_OUT/converter_lite.args"
for a in "$@"; do [[ $a == --configFile=* ]] && cat "${a#--configFile=}" > "$FAKE_OUT/converter_lite.cfg"; done
exit 0
EOF
cat > "$work/bin/atc" <<'EOF'
#!/bin/bash
printf '%s\0' "$@" > "$FAKE_OUT/atc.args"
EOF
chmod +x "$work/bin/converter_lite" "$work/bin/atc"
tools() { # NAME [ENV=VALUE...]: both scripts with the stand-in tools; their records in $work/fake_NAME
  local n=$1; shift
  rm -rf "$work/fake_$n" && mkdir -p "$work/fake_$n"
  (cd "$work/run" && env PATH="$work/bin:$PATH" FAKE_OUT="$work/fake_$n" "$@" bash "$work/$n/mindspore/convert_lite.sh" &&
    env PATH="$work/bin:$PATH" FAKE_OUT="$work/fake_$n" "$@" bash "$work/$n/mindspore/atc.sh") > "$work/tools_$n.log" 2>&1
}
tools tiny && checked "tiny tools" $CHECK tools "$ROOT/samples/tiny_cnn_preserve.onnx" "$work/fake_tiny" ||
  bad "tiny: convert_lite.sh/atc.sh: $(tail -1 "$work/tools_tiny.log")"
tools quotes && checked "quotes tools" $CHECK tools "$work/m/hostile_quotes.onnx" "$work/fake_quotes" ||
  bad "quotes: convert_lite.sh/atc.sh: $(tail -1 "$work/tools_quotes.log")"
tools two
[ $? -eq 2 ] && grep -q "set DYNAMIC_DIMS" "$work/tools_two.log" &&
  ok "two_inputs: convert_lite.sh without DYNAMIC_DIMS exits 2, asking for the symbolic dims' sizes" ||
  bad "two_inputs without DYNAMIC_DIMS: $(tail -1 "$work/tools_two.log")"
rm -rf "$work/fake_two" && mkdir -p "$work/fake_two"
(cd "$work/run" && PATH="$work/bin:$PATH" FAKE_OUT="$work/fake_two" DYNAMIC_DIMS='[1],[2]' bash "$work/two/mindspore/convert_lite.sh" &&
  PATH="$work/bin:$PATH" FAKE_OUT="$work/fake_two" DYNAMIC_DIMS='1;2' bash "$work/two/mindspore/atc.sh") > "$work/tools_two.log" 2>&1 &&
  checked "two_inputs tools" $CHECK tools "$work/m/two_inputs.onnx" "$work/fake_two" '[1],[2]' '1;2' ||
  bad "two_inputs with DYNAMIC_DIMS: $(tail -1 "$work/tools_two.log")"

# --- hostile names: files parse, nothing runs
checked "hostile files" $CHECK parse "$work/hostile"
checked "quotes files" $CHECK parse "$work/quotes"
if bash -n "$work/hostile/mindspore/convert_lite.sh" && bash -n "$work/hostile/mindspore/atc.sh" &&
   bash -n "$work/quotes/mindspore/convert_lite.sh" && bash -n "$work/quotes/mindspore/atc.sh"; then
  ok "hostile names: convert_lite.sh and atc.sh pass bash -n"
else bad "hostile names: a script does not parse"; fi
if ! grep -q "input_shape" "$work/hostile/mindspore/converter_lite.cfg" && grep -q "give INPUT_SHAPE" "$work/hostile.log"; then
  ok "a name with a newline and ';': converter_lite.cfg leaves input_shape out, and the conversion says so"
else bad "hostile converter_lite.cfg: $(cat "$work/hostile/mindspore/converter_lite.cfg")"; fi
tools hostile
[ $? -eq 2 ] && grep -q "give INPUT_SHAPE" "$work/tools_hostile.log" && ok "hostile: atc.sh asks for INPUT_SHAPE and exits 2" ||
  bad "hostile atc.sh: $(tail -1 "$work/tools_hostile.log")"
tools hostile INPUT_SHAPE='x:1,3,32,32' && [ -s "$work/fake_hostile/atc.args" ] && ok "hostile: atc.sh runs with INPUT_SHAPE given" ||
  bad "hostile atc.sh with INPUT_SHAPE: $(tail -1 "$work/tools_hostile.log")"
$PY - "$work/req" "$work/m" "$ROOT/samples/tiny_cnn_input.npy" <<'EOF'
import json, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "fixtures"))
import numpy as np
from make_ms_package_models import HOSTILE, HOSTILE_QUOTES
x = np.load(sys.argv[3]).tolist()
for name, key in (("hostile", HOSTILE), ("quotes", HOSTILE_QUOTES)):
    with open(os.path.join(sys.argv[1], name + ".json"), "w") as f:
        json.dump({key: x}, f)
EOF
judge "hostile service" "$work/hostile/modelarts/model" "hostile=logits:$ROOT/samples/tiny_cnn_logits.npy"
judge "quotes service" "$work/quotes/modelarts/model" "quotes=logits:$ROOT/samples/tiny_cnn_logits.npy"
for n in hostile quotes; do
  exported "$n export.py reaches mindspore.export" "$NOEXPORT" "$work/$n"
  (cd "$work/run" && PYTHONPATH=$STANDIN $PY "$work/$n/mindspore/export.py" --help > /dev/null 2>&1) || bad "$n export.py --help"
done
touched=$(find "$work" "$ROOT" -name 'HOSTILE_TOUCHED*' 2>/dev/null | head -3)
[ -z "$touched" ] && ok "hostile names: after converting and running every script, the service and export.py, nothing was touched" ||
  bad "a hostile name ran a command: $touched"

# --- the flags
convert flags "$ROOT/samples/tiny_cnn_preserve.onnx" "$ROOT/samples/tiny_cnn.pth" --model-algorithm image_classification \
  --modelarts-runtime mindspore_1.9.0-cann_6.0.1-py_3.7-euler_2.9.9-x86_64-snt3p-300i
r=$($PY -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["model_algorithm"], c["runtime"])' \
  "$work/flags/modelarts/model/config.json" 2>&1)
[ "$r" = "image_classification mindspore_1.9.0-cann_6.0.1-py_3.7-euler_2.9.9-x86_64-snt3p-300i" ] &&
  ok "--model-algorithm and --modelarts-runtime reach config.json" || bad "flags: $r"
r=$($PY -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["model_algorithm"], c["runtime"])' \
  "$work/tiny/modelarts/model/config.json" 2>&1)
[ "$r" = "predict_analysis mindspore_2.0.0-cann_6.3.0-py_3.7-euler_2.8.3-aarch64" ] &&
  ok "defaults: model_algorithm predict_analysis, runtime the documented MindSpore 2.0.0 + CANN 6.3.0 one" ||
  bad "defaults: $r"
refused() { # FLAG VALUE...: each value exits 2 naming the flag, and writes nothing
  local flag=$1 v all=1 rc; shift
  for v in "$@"; do
    "$MIGC" convert samples/tiny_cnn_preserve.onnx --target mindspore "$flag" "$v" -o "$work/badflag" \
      > "$work/badflag.log" 2>&1
    rc=$?
    if [ $rc -ne 2 ] || [ -e "$work/badflag" ] || ! grep -q -- "$flag" "$work/badflag.log"; then
      bad "$flag '$v': exit $rc, $(tail -1 "$work/badflag.log")"; all=0
    fi
  done
  [ $all -eq 1 ]
}
refused --model-algorithm "9lives" "a=b" "it's" 'a"b' "a<b" "a!" "a&b" "$(printf 'a%.0s' {1..37})" "" &&
  ok "bad --model-algorithm values (a digit first, each of & ! ' \" < > =, 37 characters, empty) exit 2, nothing written"
refused --modelarts-runtime "a b" "x\$(touch HOSTILE_TOUCHED)" "" && ok "bad --modelarts-runtime values exit 2, nothing written"
"$MIGC" convert samples/tiny_cnn_preserve.onnx --target mindspore --model-algorithm "$(printf 'a%.0s' {1..36})" \
  -o "$work/longflag" > /dev/null 2>&1 && ok "a --model-algorithm of 36 characters is taken" || bad "36 characters refused"
"$MIGC" convert --help | grep -q -- "--modelarts-runtime" && "$MIGC" convert --help | grep -q -- "--model-algorithm" &&
  ok "convert --help lists --modelarts-runtime and --model-algorithm" || bad "convert --help lacks the flags"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && rm -rf "$work"
[ $fail -eq 0 ]
