#!/bin/bash
# Issue 13 acceptance 1: `migc convert --target ascend` with the model's .pth, the
# project built against the aclnn emulator (make -C OUTDIR/ascend emu), run on
# torch's input, matches PyTorch eval within 1e-4 x max|output| and cosine 0.99999
# (tests/tools/npycmp); every run ends with no leak and no contract violation (the
# emulator fails aclFinalize otherwise, and the runner with it); no node falls back
# to the host unless its op is in ALLOWED_FALLBACK below (each named in coverage.md).
# usage: tests/e2e/ascend_parity.sh BUILD_DIR [MODELS]   (torchvision names; default
#        the make test set; `make test-zoo` passes issue 13's twelve)
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/par.sh
MODELS=${2:-resnet18,squeezenet1_1}
# ops the fact table shows aclnn lacks (rules/aclnn.xml's gap list), so a host
# fallback is what the issue asks for; none yet in the default set
ALLOWED_FALLBACK=${ASCEND_ALLOWED_FALLBACK:-}
tv=build/fixtures/tv
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models "$MODELS" --opsets 17 --modes default,preserve \
  --refs > /dev/null 2>&1 || { echo "export failed"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
# one NAME MODEL.onnx PTH INPUT.npy REF.npy [convert options]: its verdict line
one() {
  local name=$1 model=$2 pth=$3 input=$4 ref=$5; shift 5
  local dir=$work/$name
  if ! "$BUILD/migc" convert "$model" --weights "$pth" --target ascend -o "$dir" "$@" > "$dir.convert.log" 2>&1; then
    echo "FAIL $name: convert: $(grep -m2 -E 'error' "$dir.convert.log" | tr '\n' ' ')"; return
  fi
  local line fb
  line=$(grep "^convert: ascend:" "$dir.convert.log")
  if [[ $line != *" 0 not converted"* ]]; then echo "FAIL $name: $line; $(grep -m2 'ascend: ' "$dir.convert.log" | grep error)"; return; fi
  fb=$(sed -nE "s/^warning\[unsupported\]: node '[^']*' \(([A-Za-z]+)\): ascend: host-fallback.*/\1/p" "$dir.convert.log" | sort -u)
  for op in $fb; do
    [[ ",$ALLOWED_FALLBACK," == *",$op,"* ]] || { echo "FAIL $name: $op falls back to the host"; return; }
  done
  if ! make -s -C "$dir/ascend" emu WERROR=-Werror > "$dir.make.log" 2>&1; then
    echo "FAIL $name: make emu: $(grep -m2 -E 'error|warning' "$dir.make.log" | tr '\n' ' ')"; return
  fi
  if ! "$dir/ascend/runner" --input input="$input" --output-dir "$dir/out" > "$dir.run.log" 2>&1; then
    echo "FAIL $name: run: $(grep -m3 -E 'error|model:|runner:' "$dir.run.log" | tr '\n' ' ')"; return
  fi
  if grep -q "acl-emu: error" "$dir.run.log"; then echo "FAIL $name: $(grep -m2 'acl-emu: error' "$dir.run.log")"; return; fi
  local out res
  out=$(ls "$dir/out"/*.npy | head -1)
  if ! res=$("$BUILD/tests/npycmp" "$out" "$ref"); then echo "FAIL $name: $res"; return; fi
  echo "ok   $name: $res; $(echo "$line" | sed -E 's/^convert: ascend: ([0-9]+ aclnn calls).*/\1/'), no leak or contract violation"
}
logs=()
for m in ${MODELS//,/ }; do
  for mode in default preserve; do
    par_wait_slot
    one "${m}_$mode" "$tv/${m}_op17_$mode.onnx" "$tv/$m.pth" "$tv/${m}_input.npy" "$tv/${m}_output.npy" \
      > "$work/r_${m}_$mode" 2>&1 &
    logs+=("$work/r_${m}_$mode")
  done
done
par_wait_slot
one tiny_cnn samples/tiny_cnn.onnx samples/tiny_cnn.pth samples/tiny_cnn_input.npy samples/tiny_cnn_logits.npy \
  --input-shape input=1x3x32x32 > "$work/r_tiny" 2>&1 &
logs+=("$work/r_tiny")
# issue 7's small models, both export styles with their .pth, through verify
# --backend ascend-emu (the same tolerance, and a clean emulator exit): the reference
# folder's model_preserve.onnx, and model.onnx converted with model.pth. Host
# fallbacks are allowed only for SMALL_FALLBACK's ops (aclnnLSTM's fact entry: "NOT
# in 8.5.0 (added in 9.0.0)", ONNX LSTM's gates re-blocked: not emitted yet).
SMALL_FALLBACK=LSTM
small() { # NAME STYLE
  local m=$1 style=$2 dir=$work/small_$1_$2 target
  if [ "$style" = preserve ]; then target=$small_refs/$m
  else
    if ! "$BUILD/migc" convert "$small_refs/$m/model.onnx" --weights "$small_refs/$m/model.pth" --target ascend \
         -o "$dir" > "$dir.convert.log" 2>&1; then
      echo "FAIL $m ($style): convert: $(grep -m2 error "$dir.convert.log" | tr '\n' ' ')"; return; fi
    local op
    for op in $(sed -nE "s/^warning\[unsupported\]: node '[^']*' \(([A-Za-z]+)\): ascend: host-fallback.*/\1/p" \
                "$dir.convert.log" | sort -u); do
      [[ ",$SMALL_FALLBACK," == *",$op,"* ]] || { echo "FAIL $m ($style): $op falls back to the host"; return; }
    done
    target=$dir
  fi
  local ref=() rc
  [ "$style" = default ] && ref=(--reference "$small_refs/$m/ref.npz")
  "$BUILD/migc" verify "$target" "${ref[@]}" --backend ascend-emu --json "$dir.json" > "$dir.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -q '"verdict": *"pass"' "$dir.json" && ! grep -q "acl-emu: error" "$dir.log"; then
    echo "ok   $m ($style export): $(grep '^verify:' "$dir.log")"
  else echo "FAIL $m ($style export, exit $rc): $(grep -hE 'FAIL|ERROR|error' "$dir.log" | head -3 | cut -c1-300)"; fi
}
. tests/e2e/small_refs.sh
if small_refs_ensure > "$work/small_refs.log"; then
  for m in lstm transformer_encoder conv1d_gn_prelu tokens_and_features relpos; do
    for style in preserve default; do
      par_wait_slot
      small $m $style > "$work/s_${m}_$style" 2>&1 &
      logs+=("$work/s_${m}_$style")
    done
  done
else cat "$work/small_refs.log"; fail=$((fail + 1)); fi
# float16 and bfloat16: the float32 export rewritten in the lower type
# (tests/fixtures/lower_precision.py), the program's tensors in that type
# (ACL_FLOAT16 / ACL_BF16, cubeMathType KEEP_DTYPE), against torch's float32 output:
# float16 within 5e-3 x max|output| and cosine 0.99999, bfloat16 (8 significant bits)
# within 3e-2 and cosine 0.9999; the weights half the float32 program's.
lowp() { # NAME MODEL.onnx INPUT.npy REF.npy DTYPE [convert options]
  local name=$1 model=$2 input=$3 ref=$4 dt=$5; shift 5
  local dir=$work/lowp_${name}_$dt acl=ACL_FLOAT16 tol=5e-3 cos=0.99999
  [ "$dt" = bfloat16 ] && acl=ACL_BF16 tol=3e-2 cos=0.9999
  mkdir -p "$dir"
  /usr/bin/python3 tests/fixtures/lower_precision.py "$model" "$dir/model.onnx" $dt &&
    /usr/bin/python3 tests/fixtures/lower_precision.py --npy "$input" "$dir/input.npy" $dt ||
    { echo "FAIL $name $dt: lowering the fixture failed"; return; }
  "$BUILD/migc" convert "$dir/model.onnx" --target ascend -o "$dir/out" "$@" > "$dir/convert.log" 2>&1
  "$BUILD/migc" convert "$model" --target ascend -o "$dir/out32" "$@" > "$dir/convert32.log" 2>&1
  if ! grep -q "^convert: ascend: .* 0 not converted" "$dir/convert.log"; then
    echo "FAIL $name $dt: $(grep -m2 -E '^convert: ascend|error' "$dir/convert.log" | tr '\n' ' ')"; return; fi
  make -s -C "$dir/out/ascend" emu WERROR=-Werror > "$dir/make.log" 2>&1 ||
    { echo "FAIL $name $dt: make emu: $(grep -m2 -E 'error|warning' "$dir/make.log")"; return; }
  local inname
  inname=$(/usr/bin/python3 -c "import onnx,sys; print(onnx.load(sys.argv[1]).graph.input[0].name)" "$model")
  "$dir/out/ascend/runner" --input "$inname=$dir/input.npy" --output-dir "$dir/res" > "$dir/run.log" 2>&1 ||
    { echo "FAIL $name $dt: run: $(grep -m2 -E 'error|runner:' "$dir/run.log")"; return; }
  grep -q "aclCreateTensor([^;]*$acl" "$dir/out/ascend/model.c" ||
    { echo "FAIL $name $dt: no $acl tensor in model.c"; return; }
  local w16 w32 res
  w16=$(stat -c %s "$dir/out/ascend/model.weights") w32=$(stat -c %s "$dir/out32/ascend/model.weights")
  [ $((w16 * 2)) -le $((w32 + 4096)) ] || { echo "FAIL $name $dt: weights $w16 bytes, float32 $w32"; return; }
  if res=$(/usr/bin/python3 -c "
import sys, numpy as np
y = np.load(sys.argv[1]).astype(np.float64); r = np.load(sys.argv[2]).astype(np.float64)
rel = np.abs(y - r).max() / np.abs(r).max(); cos = (y * r).sum() / np.linalg.norm(y) / np.linalg.norm(r)
print('max err %.3g x max|torch fp32|, cosine %.9f' % (rel, cos)); sys.exit(0 if rel <= float(sys.argv[3]) and cos >= float(sys.argv[4]) else 1)
" "$(ls "$dir"/res/*.npy | head -1)" "$ref" $tol $cos); then
    echo "ok   $name $dt: $res; $acl tensors; weights $w16 bytes (float32: $w32)"
  else echo "FAIL $name $dt: $res (need <= $tol, cosine >= $cos)"; fi
}
te=$small_refs/transformer_encoder
/usr/bin/python3 -c "import numpy as np,sys; z=np.load(sys.argv[1]); np.save(sys.argv[2], z['inputs/input']); np.save(sys.argv[3], z['outputs/output'])" \
  "$te/ref.npz" "$work/te_input.npy" "$work/te_output.npy" 2> /dev/null
for dt in float16 bfloat16; do
  par_wait_slot
  lowp tiny_cnn samples/tiny_cnn.onnx samples/tiny_cnn_input.npy samples/tiny_cnn_logits.npy $dt \
    --input-shape input=1x3x32x32 > "$work/l_tiny_$dt" 2>&1 &
  logs+=("$work/l_tiny_$dt")
  par_wait_slot
  lowp transformer_encoder "$te/model.onnx" "$work/te_input.npy" "$work/te_output.npy" $dt > "$work/l_te_$dt" 2>&1 &
  logs+=("$work/l_te_$dt")
done
wait
# attention reads K transposed in place: the Transposes whose readers' fact notes
# accept non-contiguous inputs (aclnnMatmul) are strided views, not aclnnPermute copies
te=$work/small_transformer_encoder_default/ascend/model.c
nv=$(grep -c "a strided view of its input's buffer" "$te" 2>/dev/null)
if [ "${nv:-0}" -ge 1 ]; then
  echo "ok   transformer_encoder: $nv Transposes read in place by aclnnMatmul as strided views (no copy)"
  pass=$((pass + 1))
else echo "FAIL transformer_encoder: no Transpose became a strided view"; fail=$((fail + 1)); fi
for l in "${logs[@]}"; do
  cat "$l"
  if grep -q '^ok' "$l"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
