#!/bin/bash
# Issue 13 acceptance 3, the diary's routes for an op: a detection head with
# torchvision.ops.roi_align (tests/fixtures/make_roi_head.py; opset 13, and opset 17
# with coordinate_transformation_mode output_half_pixel) converts with --target
# ascend; its RoiAlign is an aclnnRoiAlign call (batch indices cast to INT32 by the
# rules' decomposition, a Cast computed at conversion here), and with --ascend-no-op RoiAlign it runs as a host fallback
# (the CPU target's kernel between device copies) with a custom-op skeleton
# (custom_ops/RoiAlign/); both match PyTorch under the aclnn emulator, with no leak
# or contract violation. The coverage report names the fallback; --strict refuses it.
# usage: tests/e2e/ascend_roi.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$BUILD/migc PY=/usr/bin/python3
fx=build/fixtures/roi
want=$(sha256sum tests/fixtures/make_roi_head.py | cut -c1-16)
if [ "$(cat "$fx/.stamp" 2>/dev/null)" != "$want" ]; then
  rm -rf "$fx"
  $PY tests/fixtures/make_roi_head.py "$fx" > "$fx.log" 2>&1 || { echo "FAIL fixture: $(tail -2 "$fx.log")"; exit 1; }
  echo "$want" > "$fx/.stamp"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
# runs DIR's program under the emulator and compares it with torch
runs() { # NAME DIR
  if ! make -s -C "$2/ascend" emu WERROR=-Werror > "$2.make" 2>&1; then bad "$1: make emu: $(head -2 "$2.make")"; return; fi
  if ! "$2/ascend/runner" --input input="$fx/input.npy" --output-dir "$2/out" > "$2.run" 2>&1 ||
     grep -q "acl-emu: error" "$2.run"; then
    bad "$1: run: $(grep -m2 -E 'error|model:' "$2.run")"; return
  fi
  local res
  if res=$("$BUILD/tests/npycmp" "$2/out/logits.npy" "$fx/output.npy"); then ok "$1: matches torch ($res)"
  else bad "$1: $res"; fi
}
for op in 13 17; do
  d=$work/native$op
  "$MIGC" convert "$fx/roi_head_op$op.onnx" --weights "$fx/roi_head.pth" --target ascend --strict -o "$d" > "$d.log" 2>&1 &&
    grep -q "aclnnRoiAlignGetWorkspaceSize(" "$d/ascend/model.c" &&
    sed -n '/\/RoiAlign (RoiAlign): aclnnRoiAlign/,/aclnnRoiAlignGetWorkspaceSize/p' "$d/ascend/model.c" |
      grep -q "aclCreateTensor(dims, 1, ACL_INT32," &&
    grep -q " 0 host fallbacks" "$d.log" &&
    ok "opset $op: converts whole (--strict); RoiAlign is an aclnnRoiAlign call on INT32 batch indices (the rules' Cast, computed at conversion: the boxes are constants)" ||
    bad "opset $op: native route: $(grep -m2 -E 'ascend|error' "$d.log")"
  runs "opset $op, aclnnRoiAlign" "$d"
  d=$work/fallback$op
  "$MIGC" convert "$fx/roi_head_op$op.onnx" --weights "$fx/roi_head.pth" --target ascend --ascend-no-op RoiAlign \
    -o "$d" > "$d.log" 2>&1
  if grep -q "^warning\[unsupported\]: node '/RoiAlign' (RoiAlign): ascend: host-fallback (cpu kernel): .*--ascend-no-op RoiAlign.* bytes cross between device and host per run" "$d.log" &&
     ! grep -q "aclnnRoiAlign" "$d/ascend/model.c" && ls "$d"/ascend/host_*RoiAlign*.c > /dev/null 2>&1 &&
     grep -q "^| RoiAlign | 1 | [a-z-]* | host-fallback |" "$d/coverage.md"; then
    ok "opset $op, --ascend-no-op RoiAlign: a host fallback (host_*.c), named in coverage.md as host-fallback"
  else bad "opset $op, fallback: $(grep -m2 -E 'RoiAlign|error' "$d.log" | cut -c1-250)"; fi
  sk=$d/ascend/custom_ops/RoiAlign
  if $PY - "$sk/RoiAlignCustom.json" <<'PY' && [ -s "$sk/op_host/RoiAlignCustom.cpp" ] && [ -s "$sk/op_kernel/RoiAlignCustom.cpp" ] &&
import json, sys
ops = json.load(open(sys.argv[1]))
o = ops[0]
assert o["op"] == "RoiAlignCustom", o["op"]
assert [d["type"] for d in o["input_desc"]] == [["float"], ["float"], ["int64"]], o["input_desc"]
assert all(len(d["format"]) == len(d["type"]) for d in o["input_desc"] + o["output_desc"])
assert {"output_height", "output_width", "sampling_ratio", "spatial_scale", "mode"} <= {a["name"] for a in o["attr"]}
PY
     grep -q "msopgen gen -i RoiAlignCustom.json" "$sk/README.md" && pyflakes3 "$sk/mindspore_register.py" > /dev/null 2>&1 &&
     grep -q 'func="aclnnRoiAlignCustom"' "$sk/mindspore_register.py"; then
    ok "opset $op: custom_ops/RoiAlign/: msopgen JSON from the graph, op_host/, op_kernel/, README, MindSpore registration"
  else bad "opset $op: skeleton $(ls -R "$sk" 2>&1 | tr '\n' ' ' | cut -c1-200)"; fi
  runs "opset $op, host fallback" "$d"
done
"$MIGC" convert "$fx/roi_head_op13.onnx" --weights "$fx/roi_head.pth" --target ascend --ascend-no-op RoiAlign --strict \
  -o "$work/strict" > "$work/strict.log" 2>&1
[ $? = 2 ] && ok "--strict --target ascend exits 2 on a host fallback" || bad "--strict with a host fallback did not exit 2"
"$MIGC" convert "$fx/roi_head_op13.onnx" --target ascend --ascend-no-op NoSuchOp -o "$work/nope" > "$work/nope.log" 2>&1
[ $? = 2 ] && grep -q "no aclnn rule has that op type or function" "$work/nope.log" &&
  ok "--ascend-no-op of a name no rule has: exit 2, saying so" || bad "--ascend-no-op NoSuchOp: $(tail -1 "$work/nope.log")"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
