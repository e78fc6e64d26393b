#!/bin/bash
# The reference interpreter against PyTorch: torchvision models with random,
# perturbed weights (BatchNorm statistics randomised, so no norm is an identity),
# exported at opset 17 by default and with TrainingMode.PRESERVE; `migc run` must
# match torch's eval output within max|err| <= 1e-4 * max|out| and cosine >= 0.99999.
# usage: tests/e2e/torchvision_interp.sh BUILD_DIR [MODELS]
set -u
BUILD=${1:-build}
MODELS=${2:-resnet18,mobilenet_v2,efficientnet_b0,vit_b_16,swin_t,convnext_tiny,deeplabv3_mobilenet_v3_large}
cd "$(dirname "$0")/../.."
out=build/fixtures/tv
mkdir -p "$out"
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$out" --models "$MODELS" \
  --opsets 17 --modes default,preserve --refs || { echo "export failed"; exit 1; }
pass=0 fail=0
for model in ${MODELS//,/ }; do
  for mode in default preserve; do
    f="$out/${model}_op17_${mode}.onnx"
    run="$out/run_${model}_${mode}"
    rm -rf "$run"
    start=$SECONDS
    if ! "$BUILD/migc" run "$f" --input input="$out/${model}_input.npy" --output-dir "$run" > "$run.log" 2>&1; then
      echo "FAIL ${model} ${mode}: $(grep -m1 error "$run.log")"; fail=$((fail + 1)); continue
    fi
    if res=$("$BUILD/tests/npycmp" "$run/output.npy" "$out/${model}_output.npy"); then
      echo "ok   ${model} ${mode} ($((SECONDS - start)) s): $res"; pass=$((pass + 1))
    else
      echo "FAIL ${model} ${mode}: $res"; fail=$((fail + 1))
    fi
  done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
