#!/bin/bash
# Issue 17, CPU int8: convert --precision int8 --calibrate on tiny_cnn (samples/), calibrated
# on MIGC_INT8_CALIB seeded inputs (default 10), against fp32 PyTorch over MIGC_INT8_EVAL
# held-out seeded inputs (default 20): top-1 agreement >= 95% and cosine >= 0.99. quant.json:
# the minmax scale of the model input is max|x| / 127 over the calibration files (numpy), the
# percentile and kl thresholds lie within [0, max|x|], and --quant-params of that file gives
# the same cpu/ byte for byte. Errors (exit 2, nothing half-written): a missing, empty or
# wrongly shaped calibration set, a quant.json of another model, int8 for the ascend target,
# int8 for the mindspore target without --calibrate, int8 without calibration, a bad --calib-method.
# The mindspore target's converter_lite.cfg quantisation sections and NHWC .bin samples.
# MIGC_INT8_ZOO=1 (make test-zoo) adds resnet18, resnet50 and mobilenet_v2 (torchvision,
# perturbed random weights), MIGC_INT8_CALIB=100 / MIGC_INT8_EVAL=500 there.
# usage: tests/e2e/int8.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$BUILD/migc
NC=${MIGC_INT8_CALIB:-10} NE=${MIGC_INT8_EVAL:-20} METHOD=${MIGC_INT8_METHOD:-percentile}
work=$(mktemp -d "${TMPDIR:-/tmp}/migc-int8.XXXXXX") tv=build/fixtures/tv
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
PY=/usr/bin/python3
M="$PY tests/fixtures/int8_measure.py"

# NAME ONNX PTH SHAPE: fp32 torch against int8 migc over NE held-out inputs
measure() {
  local name=$1 onnx=$2 pth=$3 shape=$4 d=$work/$1 r
  mkdir -p "$d"
  $M inputs "$d/cal" "$NC" 0 "$shape" && $M stack "$d/eval.npy" "$NE" 1 "$shape" || { bad "$name: inputs"; return; }
  "$MIGC" convert "$onnx" --weights "$pth" --cpu-only --dynamic input --precision int8 --calibrate "$d/cal" --calib-method "$METHOD" \
    -o "$d/q" > "$d/q.log" 2>&1 || { bad "$name: convert int8: $(grep -m1 error "$d/q.log")"; return; }
  make -s -C "$d/q/cpu" > "$d/make.log" 2>&1 || { bad "$name: int8 project does not build"; return; }
  "$d/q/cpu/runner" --input input="$d/eval.npy" --output-dir "$d/out" > /dev/null 2>&1 || { bad "$name: runner"; return; }
  $M torch "$name" "$pth" "$d/eval.npy" "$d/torch.npy" || { bad "$name: torch"; return; }
  r=$($M agree "$d/torch.npy" "$d/out/$(ls "$d/out" | head -1)")
  $PY -c 'import json, sys
r = json.loads(sys.argv[1]); bad = r["top1"] < 0.95 or r["cos_min"] < 0.99
print("%s %s int8 (%s, %d calibration inputs) vs fp32 torch: top-1 %.1f%% over %d inputs (%d classes), cosine min %.5f mean %.5f; %s" % (
  "FAIL" if bad else "ok  ", sys.argv[2], sys.argv[3], int(sys.argv[4]), 100 * r["top1"], r["samples"], r["classes"],
  r["cos_min"], r["cos_mean"], sys.argv[5]))' "$r" "$name" "$METHOD" "$NC" "$(grep -m1 'Conv/Gemm' "$d/q.log" | sed 's/convert: int8: //')" \
    | tee "$d/verdict"
  grep -q '^ok' "$d/verdict" && pass=$((pass + 1)) || fail=$((fail + 1))
}

measure tiny_cnn samples/tiny_cnn.onnx samples/tiny_cnn.pth 1x3x32x32
d=$work/tiny_cnn

# quant.json: the schema, and minmax's input scale computed here from the files
if "$MIGC" convert samples/tiny_cnn.onnx --weights samples/tiny_cnn.pth --cpu-only --precision int8 \
     --calibrate "$d/cal" --calib-method minmax -o "$d/mm" > "$d/mm.log" 2>&1; then
  amax=$($M minmax "$d/cal")
  $PY - "$d/mm/quant.json" "$amax" "$d/q/quant.json" "$d/mm/convert.json" <<'PYEOF' && ok "quant.json: schema; minmax input scale = max|x|/127 (numpy); percentile threshold <= max|x|; convert.json lists int8 and float32 layers" || bad "quant.json contents"
import json, sys, math
q = json.load(open(sys.argv[1])); amax = float(sys.argv[2]); p = json.load(open(sys.argv[3]))
c = json.load(open(sys.argv[4]))
assert q["migc_quant"] == 1 and q["method"] == "minmax" and q["samples"] == 10 and len(q["model_hash"]) == 64, q
a = q["activations"]["input"]
assert a["zero_point"] == 128 and math.isclose(a["scale"], amax / 127, rel_tol=1e-6), (a, amax)
assert all(v["zero_point"] == 0 for k, v in q["activations"].items() if k != "input"), q["activations"]
pin = p["activations"]["input"]
assert p["method"] == "percentile" and p["percentile"] == 99.99 and 0 < pin["threshold"] <= amax, pin
w = q["weights"]
assert set(w) == {"/conv1/Conv", "/conv2/Conv"} and len(w["/conv1/Conv"]["scales"]) == 8, w.keys()
i8 = c["int8"]
assert [l["node"] for l in i8["int8_layers"]] == ["/conv1/Conv", "/conv2/Conv"], i8
assert [l["node"] for l in i8["float32_layers"]] == ["/fc/Gemm"] and i8["float32_layers"][0]["why"], i8
PYEOF
else
  bad "convert --calib-method minmax: $(grep -m1 error "$d/mm.log")"
fi
if "$MIGC" convert samples/tiny_cnn.onnx --weights samples/tiny_cnn.pth --cpu-only --precision int8 \
     --calibrate "$d/cal" --calib-method kl -o "$d/kl" > "$d/kl.log" 2>&1 &&
   $PY -c 'import json, sys; q = json.load(open(sys.argv[1])); m = json.load(open(sys.argv[2]))
assert q["method"] == "kl"
for k, v in q["activations"].items(): assert 0 < v["threshold"] <= m["activations"][k]["threshold"] * (1 + 1e-9), k' \
     "$d/kl/quant.json" "$d/mm/quant.json"; then
  ok "--calib-method kl: thresholds within (0, max|x|]"
else
  bad "--calib-method kl"
fi

# round trip: --quant-params of the percentile run gives the same project
if "$MIGC" convert samples/tiny_cnn.onnx --weights samples/tiny_cnn.pth --cpu-only --precision int8 \
     --quant-params "$d/q/quant.json" -o "$d/rt" > "$d/rt.log" 2>&1 &&
   cmp -s "$d/q/cpu/model.c" "$d/rt/cpu/model.c" && cmp -s "$d/q/cpu/model.weights" "$d/rt/cpu/model.weights" &&
   $PY -c 'import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:]); assert a["activations"] == b["activations"]' \
     "$d/q/quant.json" "$d/rt/quant.json"; then
  ok "--quant-params round trip: same model.c, model.weights and activations"
else
  bad "--quant-params round trip"
fi

# --threads 2: the int8 layers run on one thread, the project still builds with its pool
if "$MIGC" convert samples/tiny_cnn.onnx --weights samples/tiny_cnn.pth --cpu-only --dynamic input --threads 2 \
     --precision int8 --quant-params "$d/q/quant.json" -o "$d/thr" > "$d/thr.log" 2>&1 && make -s -C "$d/thr/cpu" > /dev/null 2>&1 &&
   "$d/thr/cpu/runner" --threads 2 --input input="$d/eval.npy" --output-dir "$d/thr/out" > /dev/null 2>&1 &&
   cmp -s "$d/thr/out/logits.npy" "$d/out/logits.npy"; then
  ok "--threads 2: builds, same int8 outputs"
else
  bad "--threads 2 with int8"
fi

# the int8 weights file holds int8 weights: smaller than the fp32 one
"$MIGC" convert samples/tiny_cnn.onnx --weights samples/tiny_cnn.pth --cpu-only -o "$d/f32" > /dev/null 2>&1
s8=$(stat -c %s "$d/q/cpu/model.weights") s32=$(stat -c %s "$d/f32/cpu/model.weights")
[ "$s8" -lt "$s32" ] && ok "int8 model.weights $s8 bytes < fp32 $s32 bytes" || bad "weights: int8 $s8, fp32 $s32"

# errors: exit 2 with a message, and no output folder left behind
expect2() {
  local what=$1 want=$2 out=$work/err_$pass$fail
  shift 2
  "$MIGC" convert samples/tiny_cnn.onnx --weights samples/tiny_cnn.pth "$@" -o "$out" > "$out.log" 2>&1
  local rc=$?
  if [ $rc = 2 ] && grep -q -- "$want" "$out.log" && [ ! -f "$out/cpu/model.c" ]; then ok "$what: exit 2 ($want)"
  else bad "$what: rc $rc, $(grep -m1 -E 'error|migc' "$out.log")"; fi
}
mkdir -p "$work/empty" "$work/wrong"
$M inputs "$work/wrong" 2 0 1x3x16x16
expect2 "missing calibration folder" "no such file" --precision int8 --calibrate "$work/nope"
expect2 "empty calibration folder" "no calibration samples" --precision int8 --calibrate "$work/empty"
expect2 "wrongly shaped samples" "calibration sample has shape" --precision int8 --calibrate "$work/wrong"
cp "$d/q/quant.json" "$work/other.json"
"$MIGC" convert samples/tiny_cnn_preserve.onnx --weights samples/tiny_cnn.pth --cpu-only --precision int8 \
  --quant-params "$work/other.json" -o "$work/mismatch" > "$work/mismatch.log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "made for another model" "$work/mismatch.log" && ok "quant.json of another model: exit 2" \
  || bad "mismatched --quant-params: rc $rc"
expect2 "int8 for the ascend target" "not yet supported for the ascend target" --target ascend --precision int8 --calibrate "$d/cal"
expect2 "int8 for the mindspore target without samples" "needs --calibrate" --target mindspore --precision int8 --quant-params "$d/q/quant.json"
# the mindspore target: converter_lite.cfg's quantisation sections (facts.md lines 346-356) and the samples
if "$MIGC" convert samples/tiny_cnn.onnx --weights samples/tiny_cnn.pth --target mindspore --precision int8 \
     --calibrate "$d/cal" --calib-method minmax -o "$d/ms" > "$d/ms.log" 2>&1 &&
   $PY - "$d/ms/mindspore" "$d/cal" <<'PYEOF'; then
import sys, numpy as np
ms, cal = sys.argv[1:]
cfg = open(ms + "/converter_lite.cfg").read()
for line in ["[common_quant_param]", "quant_type=FULL_QUANT", "bit_num=8", "[data_preprocess_param]",
             "calibrate_path=input:calibration", "calibrate_size=10", "input_type=BIN", "[full_quant_param]",
             "activation_quant_method=MAX_MIN"]:
    assert line in cfg.splitlines(), (line, cfg)
a = np.fromfile(ms + "/calibration/sample_00004.bin", dtype=np.float32).reshape(1, 32, 32, 3)
assert np.array_equal(a, np.load(cal + "/s0004.npy").transpose(0, 2, 3, 1))
PYEOF
  ok "mindspore int8: converter_lite.cfg FULL_QUANT / MAX_MIN / BIN, samples NHWC float32"
else
  bad "mindspore int8: $(grep -m1 error "$d/ms.log")"
fi
expect2 "int8 without calibration" "needs --calibrate" --precision int8
expect2 "bad --calib-method" "calib-method must be" --precision int8 --calibrate "$d/cal" --calib-method mse
expect2 "--calibrate without int8" "go with --precision int8" --calibrate "$d/cal"

if [ "${MIGC_INT8_ZOO:-0}" = 1 ]; then
  $PY tests/fixtures/export_torchvision.py -o "$tv" --models resnet18,resnet50,mobilenet_v2 --opsets 17 \
    --modes default > /dev/null || { bad "torchvision export"; }
  for m in resnet18 resnet50 mobilenet_v2; do
    measure $m "$tv/${m}_op17_default.onnx" "$tv/$m.pth" 1x3x224x224
  done
fi

echo "int8: $pass passed, $fail failed"
[ $fail = 0 ]
