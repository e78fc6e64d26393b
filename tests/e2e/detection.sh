#!/bin/bash
# Detection models reach C (issue 18): torchvision detectors (weights=None,
# perturbed, eval; tests/fixtures/export_detection.py) exported at opsets 13 and
# 17 convert whole with --input-shape and --strict, their projects build, and the
# C and the interpreter give torch's detections: the same count, each matched by
# label, score and box (tests/fixtures/compare_detections.py, boxes within 1e-4
# relative). The post-processing has run-time lengths (NonZero, TopK on a
# computed k, NonMaxSuppression, If on an empty check): codegen/c/cg_dynamic.c.
# A moved box must fail the comparison, so the check can fail.
# usage: tests/e2e/detection.sh BUILD_DIR [MODEL...]   (default: every model)
# DET_OPSETS (default "13 17"): the opsets checked; make test checks 17, make
# test-zoo both.
set -u -o pipefail
BUILD=${1:-build}
shift || true
MODELS=${*:-ssdlite fasterrcnn}
cd "$(dirname "$0")/../.."
. tests/e2e/par.sh
MIGC=$BUILD/migc CMP="/usr/bin/python3 tests/fixtures/compare_detections.py"
fx=build/fixtures/det
want=$(sha256sum tests/fixtures/export_detection.py tests/fixtures/export_torchvision.py | sha256sum | cut -c1-16)
if [ "$(cat "$fx/.stamp" 2>/dev/null)" != "$want" ]; then
  rm -rf "$fx"
  echo "exporting detection fixtures (about a minute; one process per detector)"
  pids=()
  for m in ssdlite fasterrcnn; do
    /usr/bin/python3 tests/fixtures/export_detection.py -o "$fx" --models $m > "$fx.$m.log" 2>&1 & pids+=($!)
  done
  export_failed=0
  for p in "${pids[@]}"; do wait "$p" || export_failed=1; done
  [ $export_failed = 0 ] || { echo "fixture failed"; tail -5 "$fx".*.log; exit 1; }
  echo "$want" > "$fx/.stamp"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
check() { # name command...
  local name=$1; shift
  if "$@" > "$work/last.$BASHPID.log" 2>&1; then echo "ok   $name"; pass=$((pass + 1))
  else echo "FAIL $name"; sed 's/^/     /' "$work/last.$BASHPID.log" | tail -5; fail=$((fail + 1)); fi
}
# one_model MODEL: every check of one detector, in a subshell of its own (the two
# detectors run side by side); its last line counts what passed and failed
one_model() {
  local model=$1 opset name out
  pass=0 fail=0
  mkdir -p "$work/moved_$model"
  for opset in ${DET_OPSETS:-13 17}; do
    name=${model}_op$opset out=$work/$name
    check "$name: converts whole (--strict) with --input-shape" \
      "$MIGC" convert "$fx/$name.onnx" --cpu-only --strict --input-shape image=3x320x320 -o "$out"
    check "$name: the project builds" make -s -C "$out/cpu" -j2
    check "$name: the C runs" "$out/cpu/runner" --input image="$fx/${model}_input.npy" --output-dir "$out/c"
    # scores within 1e-4: the fixture's sharpened logits (x1000) magnify float noise
    check "$name: the C gives torch's detections" $CMP "$fx/$model" "$out/c" --score-atol 1e-4
    check "$name: the interpreter runs" "$MIGC" run "$fx/$name.onnx" --input image="$fx/${model}_input.npy" \
      --output-dir "$out/i"
    check "$name: the interpreter gives torch's detections" $CMP "$fx/$model" "$out/i" --score-atol 1e-4
    check "$name: the C gives the interpreter's detections (1e-5)" $CMP "$out/i" "$out/c" --box-rtol 1e-5
  done
  if [ -f "$fx/${model}_op17_raw.onnx" ]; then
    check "$model: the export's RoiAlign without coordinate_transformation_mode is a warning" \
      bash -c "'$MIGC' inspect '$fx/${model}_op17_raw.onnx' 2>&1 | grep -q 'RoiAlign at opset 17 has no coordinate_transformation_mode'"
    check "$model: ... and not once the mode is there" \
      bash -c "! '$MIGC' inspect '$fx/${model}_op17.onnx' 2>&1 | grep -q 'has no coordinate_transformation_mode'"
    "$MIGC" run "$fx/${model}_op17_raw.onnx" --input image="$fx/${model}_input.npy" --output-dir "$work/raw_$model" > /dev/null 2>&1
    if $CMP "$fx/$model" "$work/raw_$model" --score-atol 1e-4 > /dev/null 2>&1; then
      echo "FAIL $model: the raw export (half_pixel RoiAlign) gives torch's detections: the warning is wrong"; fail=$((fail + 1))
    else pass=$((pass + 1)); fi
  fi
  # the comparison can fail: one box coordinate moved by 1e-3 relative
  /usr/bin/python3 -c "
import numpy as np, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
for t in ('scores', 'labels'): shutil.copy('%s/%s.npy' % (src, t), '%s/%s.npy' % (dst, t))
b = np.load(src + '/boxes.npy')
if b.size: b[0, 2] = b[0, 2] * np.float32(1.001) + np.float32(1e-3)
np.save(dst + '/boxes.npy', b)" "$work/${model}_op17/c" "$work/moved_$model" 2>/dev/null
  if [ -s "$work/moved_$model/boxes.npy" ] && ! $CMP "$fx/$model" "$work/moved_$model" > /dev/null 2>&1; then pass=$((pass + 1))
  else echo "FAIL $model: a moved box still matches (the check cannot fail, or there are no detections)"; fail=$((fail + 1)); fi
  echo "COUNTS $pass $fail"
}
logs=()
for model in $MODELS; do
  logs+=("$work/$model.checks")
  ( one_model "$model" > "$work/$model.checks" 2>&1 ) &
  par_wait_slot
done
wait
par_collect "${logs[@]}"
# A small run-time length: x[x > 0] is as long as the data says (the C output's
# dims follow), and CumSum over it has no rule: reported, never computed over the
# planned length.
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T
d = sys.argv[1]
def model(extra, path):
    nodes = [h.make_node("Constant", [], ["zero"], value=h.make_tensor("z", T.FLOAT, [], [0.0])),
             h.make_node("Greater", ["x", "zero"], ["m"]), h.make_node("NonZero", ["m"], ["nz"]),
             h.make_node("Constant", [], ["ax"], value=h.make_tensor("a", T.INT64, [1], [0])),
             h.make_node("Squeeze", ["nz", "ax"], ["idx"]), h.make_node("Gather", ["x", "idx"], ["pos"])] + extra
    out = "y" if extra else "pos"
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [7])],
                     [h.make_tensor_value_info(out, T.FLOAT, None)])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
model([], d + "/pos.onnx")
model([h.make_node("CumSum", ["pos", "ax"], ["y"])], d + "/cumsum.onnx")
np.save(d + "/x.npy", np.array([1.5, -2, 0, 3, -0.5, 4, 0], np.float32))
PY
check "x[x > 0]: converts (--strict), builds" bash -c "'$MIGC' convert '$work/pos.onnx' --cpu-only --strict -o '$work/pos' && make -s -C '$work/pos/cpu'"
check "x[x > 0]: the C output has the data's length and values" bash -c "'$work/pos/cpu/runner' --input x='$work/x.npy' \
  --output-dir '$work/pos/run' && /usr/bin/python3 -c \"import numpy as np; y = np.load('$work/pos/run/pos.npy'); \
assert y.tolist() == [1.5, 3.0, 4.0], y\""
"$MIGC" convert "$work/cumsum.onnx" --cpu-only --strict -o "$work/cumsum" > "$work/cumsum.log" 2>&1
rc=$?
check "CumSum over a run-time length: reported, --strict exits 2" \
  bash -c "[ $rc -eq 2 ] && grep -q '(CumSum): cpu: run-time length' '$work/cumsum.log'"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
