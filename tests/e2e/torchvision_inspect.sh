#!/bin/bash
# Exports torchvision models (random weights, perturbed, static 1x3x224x224 input)
# at opsets 13 and 17, default and TrainingMode.PRESERVE, with Debian's torch, then
# checks that `migc inspect` imports each one, knows every op, and infers a static
# shape for every intermediate tensor. Exports are cached in build/fixtures/tv.
# Opset 13 (LayerNorm decomposed, Split/Squeeze axes as attributes) is exported for
# OP13_MODELS only: vit_b_16's and swin_t's opset-13 exports cost CI 160 s, and
# `make test-zoo` passes the whole list.
# usage: tests/e2e/torchvision_inspect.sh MIGC [MODELS [OP13_MODELS]]
set -u
MIGC=${1:-build/migc}
MODELS=${2:-resnet18,mobilenet_v2,efficientnet_b0,vit_b_16,swin_t,convnext_tiny,deeplabv3_mobilenet_v3_large}
OP13_MODELS=${3:-resnet18,mobilenet_v2,efficientnet_b0,convnext_tiny,deeplabv3_mobilenet_v3_large}
cd "$(dirname "$0")/../.."
out=build/fixtures/tv
mkdir -p "$out"
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$out" --models "$MODELS" \
  --opsets 17 --modes default,preserve || { echo "export failed"; exit 1; }
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$out" --models "$OP13_MODELS" \
  --opsets 13 --modes default,preserve || { echo "export failed"; exit 1; }
pass=0 fail=0
for model in ${MODELS//,/ }; do
  ops=17; [[ ",$OP13_MODELS," == *",$model,"* ]] && ops="13 17"
  for op in $ops; do for f in "$out/${model}_op${op}"_*.onnx; do
    [ -e "$f" ] || { echo "FAIL $model: no export"; fail=$((fail + 1)); continue; }
    if ! "$MIGC" inspect --json "$f" > "$out/inspect.json" 2> "$out/inspect.err"; then
      echo "FAIL $(basename "$f"): $(head -1 "$out/inspect.err")"; fail=$((fail + 1)); continue
    fi
    verdict=$(jq -r 'if (.unknown_ops | length) > 0 then "unknown ops: \(.unknown_ops)"
      elif .shapes.static != .shapes.tensors then
        "\(.shapes.tensors - .shapes.static) of \(.shapes.tensors) tensors not static, first: \(.shapes.first_dynamic[0])"
      elif (.outputs[0].shape | all(type == "number")) | not then "output shape not static"
      else "ok" end' "$out/inspect.json")
    if [ "$verdict" = ok ]; then pass=$((pass + 1)); else echo "FAIL $(basename "$f"): $verdict"; fail=$((fail + 1)); fi
  done; done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
