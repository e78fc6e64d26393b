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
. tests/e2e/par.sh
out=build/fixtures/tv
mkdir -p "$out"
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$out" --models "$MODELS" \
  --opsets 17 --modes default,preserve --refs || { echo "export failed"; exit 1; }
# one MODEL MODE: runs the export through the interpreter; prints its ok/FAIL line
one() {
  local model=$1 mode=$2 f="$out/${1}_op17_${2}.onnx" run="$out/run_${1}_${2}" start=$SECONDS res
  rm -rf "$run"
  if ! "$BUILD/migc" run "$f" --input input="$out/${model}_input.npy" --output-dir "$run" > "$run.log" 2>&1; then
    echo "FAIL ${model} ${mode}: $(grep -m1 error "$run.log")"; return
  fi
  if res=$("$BUILD/tests/npycmp" "$run/output.npy" "$out/${model}_output.npy"); then
    echo "ok   ${model} ${mode} ($((SECONDS - start)) s): $res"
  else echo "FAIL ${model} ${mode}: $res"; fi
}
# as many at once as there are cores (each run is single-threaded); lines in order
results=()
for model in ${MODELS//,/ }; do
  for mode in default preserve; do
    r="$out/result_${model}_${mode}"; results+=("$r")
    one "$model" "$mode" > "$r" 2>&1 &
    par_wait_slot
  done
done
wait
cat "${results[@]}"
pass=$(cat "${results[@]}" | grep -c '^ok') fail=$(cat "${results[@]}" | grep -c '^FAIL')
echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -eq ${#results[@]} ]
