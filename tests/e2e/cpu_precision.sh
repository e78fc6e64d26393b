#!/bin/bash
# Issue 17, CPU target: convert --precision fp16|bf16 holds the weights (prepared panels
# included) in 16 bits in model.weights and in memory, widened per layer and computed in
# float32 (codegen/c/cg_half.c), measured against fp32 PyTorch over MIGC_CPU16_SAMPLES
# seeded inputs (tests/fixtures/cpu_measure.py; default 20 on tiny_cnn and issue 7's
# transformer_encoder; `make test-zoo` sets MIGC_CPU16_SAMPLES=200 MIGC_CPU16_ZOO=1, which
# adds resnet18, mobilenet_v2, efficientnet_b0 and vit_b_16): per-sample cosine >= 0.999
# and, for classifiers, top-1 agreement >= 99%. The fp16 weights file is about half the
# fp32 one; a weights file of another precision is refused at init; convert.json says what
# stayed float32; --target ascend at 16 bits is still an unsupported error. Measured
# failures at 200 inputs are listed in tests/e2e/cpu_precision_xfail.txt with the reason.
# usage: tests/e2e/cpu_precision.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$BUILD/migc
N=${MIGC_CPU16_SAMPLES:-20}
work=$(mktemp -d "${TMPDIR:-/tmp}/migc-cpu16.XXXXXX") tv=build/fixtures/tv
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
PY=/usr/bin/python3

. tests/e2e/small_refs.sh
small_refs_ensure || exit 1
models="tiny_cnn:samples/tiny_cnn.onnx:samples/tiny_cnn.pth"
te=build/fixtures/ms_verify/transformer_encoder
models="$models transformer_encoder:$te/model.onnx:$te/model.pth"
if [ -n "${MIGC_CPU16_ZOO:-}" ]; then
  ls $tv/{resnet18,mobilenet_v2,efficientnet_b0,vit_b_16}.pth >/dev/null 2>&1 || \
    $PY tests/fixtures/export_torchvision.py -o "$tv" --models resnet18,mobilenet_v2,efficientnet_b0,vit_b_16 \
      --opsets 17 --modes default >/dev/null || { echo "export failed"; exit 1; }
  for m in resnet18 mobilenet_v2 efficientnet_b0 vit_b_16; do models="$models $m:$tv/${m}_op17_default.onnx:$tv/$m.pth"; done
fi

# NAME ONNX PTH: $work/NAME_P/cpu/runner for P in fp32 fp16 bf16
convert_build() {
  local p
  for p in fp32 fp16 bf16; do
    "$MIGC" convert "$2" --weights "$3" --target cpu --precision $p -o "$work/$1_$p" > "$work/$1_$p.log" 2>&1 \
      || { bad "$1: convert --precision $p: $(grep -m1 error "$work/$1_$p.log")"; return 1; }
    make -s -C "$work/$1_$p/cpu" WERROR=-Werror > "$work/$1_$p.make" 2>&1 \
      || { bad "$1: the $p project does not build: $(tail -2 "$work/$1_$p.make")"; return 1; }
  done
}

# LINE: the acceptance check (cosine, and top-1 for classifiers)
verdict() {
  $PY -c 'import json, sys
r = json.loads(sys.argv[1])
bad = r["cos_min"] < 0.999 or r.get("top1", 1.0) < 0.99
print("%s cpu %s %s: cosine min %.7f mean %.7f, rel err max %.2g mean %.2g%s over %d inputs" % (
    "FAIL" if bad else "ok", r["model"], r["label"], r["cos_min"], r["cos_mean"], r["rel_max"], r["rel_mean"],
    ", top-1 %.1f%% top-5 %.1f%%" % (100 * r["top1"], 100 * r["top5"]) if "top1" in r else "", r["samples"]))' "$1"
}

for spec in $models; do
  IFS=: read -r name onnx pth <<< "$spec"
  convert_build "$name" "$onnx" "$pth" || continue
  out=$(nice $PY tests/fixtures/cpu_measure.py "$name" "$N" fp32="$work/${name}_fp32/cpu/runner" \
        fp16="$work/${name}_fp16/cpu/runner" bf16="$work/${name}_bf16/cpu/runner" 2>"$work/$name.err") \
    || { bad "$name: measuring failed: $(tail -1 "$work/$name.err")"; continue; }
  while read -r line; do
    echo "$line" >> "$work/measured.jsonl"
    v=$(verdict "$line")
    prec=$($PY -c 'import json, sys; print(json.loads(sys.argv[1])["label"])' "$line")
    xf=$(awk -v m="$name" -v p="$prec" '$1 == m && $2 == p' tests/e2e/cpu_precision_xfail.txt)
    if [ -n "$xf" ] && [ "$N" -ge 200 ]; then
      [[ $v == FAIL* ]] && ok "xfail (cpu_precision_xfail.txt) ${v#FAIL }" || bad "XPASS: ${v#ok }: drop it from cpu_precision_xfail.txt"
    else
      [[ $v == ok* ]] && ok "${v#ok }" || bad "${v#FAIL }"
    fi
  done <<< "$out"
  a=$(stat -c %s "$work/${name}_fp32/cpu/model.weights") b=$(stat -c %s "$work/${name}_fp16/cpu/model.weights")
  c=$(stat -c %s "$work/${name}_bf16/cpu/model.weights")
  r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')
  # the small models' float32 biases and norms (under 256 elements) are a large share
  lo=0.49 hi=0.51; [ "$name" = tiny_cnn ] || [ "$name" = transformer_encoder ] && hi=0.56
  awk -v r="$r" -v lo=$lo -v hi=$hi 'BEGIN { exit !(r >= lo && r <= hi) }' && [ "$b" = "$c" ] \
    && ok "$name: fp16 weights file $b bytes, fp32 $a (ratio $r), bf16 $c" \
    || bad "$name: fp16/fp32 weights ratio $r not in [$lo, $hi] (bf16 $c, fp16 $b)"
done
[ -n "${MIGC_CPU16_TABLE:-}" ] && cp "$work/measured.jsonl" "$MIGC_CPU16_TABLE"

# the 16-bit weights stay 16-bit in memory: the code widens per step, never at init
t=$work/tiny_cnn_fp16/cpu
if [ -x $t/runner ]; then
  grep -q "mg_rt_expand_f16((float \*)(A + " $t/model.c && ! grep -q "mg_rt_expand" <(sed -n '/_init_with(/,/^}/p' $t/model.c) \
    && ok "fp16 code widens weights per step into the arena, not in model_init" || bad "fp16 code: no per-step widening"
  grep -q "mg_rt_expand_bf16" $work/tiny_cnn_bf16/cpu/model.c && ok "bf16 code widens with mg_rt_expand_bf16" \
    || bad "bf16 code: no mg_rt_expand_bf16"
  x=$work/x.npy
  $PY -c 'import numpy as np, sys; np.save(sys.argv[1], np.random.RandomState(5).randn(4, 3, 32, 32).astype(np.float32))' "$x"
  $t/runner --weights $work/tiny_cnn_fp32/cpu/model.weights --input input="$x" --output-dir $work/o1 > $work/o1.log 2>&1
  rc=$?
  [ $rc != 0 ] && grep -q "does not belong to this model" $work/o1.log && ok "an fp16 model refuses an fp32 weights file at init (exit $rc)" \
    || bad "fp16 model with fp32 weights: exit $rc: $(tail -1 $work/o1.log)"
  $work/tiny_cnn_bf16/cpu/runner --weights $t/model.weights --input input="$x" --output-dir $work/o2 > $work/o2.log 2>&1
  rc=$?
  [ $rc != 0 ] && grep -q "does not belong to this model" $work/o2.log && ok "a bf16 model refuses an fp16 weights file at init (exit $rc)" \
    || bad "bf16 model with fp16 weights: exit $rc: $(tail -1 $work/o2.log)"
  $PY - "$work/tiny_cnn_fp16/convert.json" <<'PYEOF' && ok "convert.json records cpu_precision (16-bit and kept-float32 counts)" || bad "convert.json cpu_precision"
import json, sys
c = json.load(open(sys.argv[1]))["cpu_precision"]
assert c["weights"] == "fp16" and c["weights_16bit"] >= 2 and c["activations"] == "float32", c
assert c["kept_float32"]["small"] >= 1, c
PYEOF
fi
# LayerNorm's parameters stay float32: as many as the ONNX graph's LayerNormalization
# nodes read as initializers (counted by onnx, not by migc)
if [ -f "$work/transformer_encoder_fp16/convert.json" ]; then
  want=$($PY -c 'import onnx, sys
g = onnx.load(sys.argv[1]).graph
inits = {t.name for t in g.initializer}
print(len({i for n in g.node if n.op_type == "LayerNormalization" for i in n.input[1:] if i in inits}))' "$te/model.onnx")
  got=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["cpu_precision"]["kept_float32"]["normalisation"])' \
        "$work/transformer_encoder_fp16/convert.json")
  [ "$want" -ge 2 ] && [ "$got" = "$want" ] && ok "transformer_encoder: its $got LayerNorm parameters kept float32" \
    || bad "transformer_encoder: $got normalisation tensors kept float32, the graph's LayerNorms read $want"
fi
"$MIGC" convert samples/tiny_cnn.onnx --precision fp16 --target cpu,ascend -o "$work/a16" > "$work/a16.log" 2>&1
[ $? = 2 ] && grep -q "error\[unsupported\]: --precision fp16 is not yet supported for the ascend target" "$work/a16.log" \
  && ok "--precision fp16 --target ascend: an unsupported error, exit 2" || bad "--target ascend fp16: $(tail -2 "$work/a16.log")"

# migc verify --precision: the converted folder's precision, top-1/top-5, precision= policy rules
r=build/fixtures/ms_verify/resnet18 vr=$work/vr16
if "$MIGC" convert $r/model.onnx --weights $r/model.pth --cpu-only --precision fp16 -o $vr > $work/vr.log 2>&1; then
  "$MIGC" verify $vr --reference $r/ref.npz --backend c --precision fp16 --json $work/v.json > $work/v.log 2>&1
  rc=$?
  [ $rc = 0 ] && grep -q "at fp16: mean rel err .*top-1 agreement 100.00%, top-5 100.00% over 1 rows" $work/v.log \
    && $PY -c 'import json, sys
j = json.load(open(sys.argv[1]))
o = j["outputs"][0]
assert j["precision"] == "fp16" and o["precision"]["top1_agreement"] == 1.0 and o["precision"]["min_top1"] == 0.99, o
assert o["tolerance"]["min_cosine"] == 0.999 and 0 < o["precision"]["mean_rel_err"] < 1e-2, o' $work/v.json \
    && ok "verify --precision fp16: resnet18 passes the default 16-bit budget, top-1/top-5 and mean rel err reported" \
    || bad "verify --precision fp16: exit $rc: $(tail -3 $work/v.log)"
  printf '<parity-policy>\n  <forward precision="bf16" cosine="0.99999999"/>\n</parity-policy>\n' > $work/pb.xml
  printf '<parity-policy>\n  <forward precision="fp16" cosine="0.99999999"/>\n</parity-policy>\n' > $work/pf.xml
  "$MIGC" verify $vr --reference $r/ref.npz --backend c --precision fp16 --policy $work/pb.xml > $work/vb.log 2>&1
  rb=$?
  "$MIGC" verify $vr --reference $r/ref.npz --backend c --precision fp16 --policy $work/pf.xml > $work/vf.log 2>&1
  rf=$?
  [ $rb = 0 ] && [ $rf = 1 ] && grep -q "FAIL: cosine 0.9999" $work/vf.log \
    && ok "policy rules with precision= apply at that precision only (bf16 rule ignored: pass; fp16 rule: fail)" \
    || bad "precision= policy: bf16 rule exit $rb, fp16 rule exit $rf: $(grep -m1 output $work/vf.log)"
  "$MIGC" verify $vr --reference $r/ref.npz --backend c > $work/vm.log 2>&1
  rc=$?
  [ $rc = 2 ] && grep -q "converted with --precision fp16, not fp32" $work/vm.log \
    && ok "verify of an fp16 folder without --precision fp16: exit 2 naming it" || bad "precision mismatch: exit $rc: $(tail -1 $work/vm.log)"
else
  bad "convert $r --precision fp16: $(grep -m1 error $work/vr.log)"
fi
"$MIGC" verify $r --precision fp16 > $work/vi.log 2>&1
[ $? = 2 ] && grep -q "give --backend c" $work/vi.log && ok "verify --precision fp16 with the interpreter backend: exit 2" \
  || bad "verify --precision --backend interp: $(tail -1 $work/vi.log)"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
