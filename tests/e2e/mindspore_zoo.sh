#!/bin/bash
# Issue 12 acceptance 1 on the model zoo (make test-zoo): for each of the twelve
# torchvision models, in both export styles (default: BatchNorm folded, anonymous
# names; preserve) with their .pth, `migc convert --target mindspore` converts every
# node (none refused, none a custom op), and net.py + model.ckpt under the MindSpore
# stand-in match torch eval within 1e-4 x max|torch| and cosine 0.99999, with every
# parameter loaded and no checkpoint tensor unused (run.py refuses otherwise).
# usage: tests/e2e/mindspore_zoo.sh BUILD_DIR [MODEL,...]
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$BUILD/migc
MODELS=${2:-resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,squeezenet1_1,shufflenet_v2_x1_0,densenet121,vit_b_16,convnext_tiny,swin_t,deeplabv3_mobilenet_v3_large}
tv=$BUILD/fixtures/tv work=$(mktemp -d "${TMPDIR:-/tmp}/migc-mszoo.XXXXXX")
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models "$MODELS" --opsets 17 \
  --modes default,preserve >/dev/null || { echo "export failed"; exit 1; }
for m in ${MODELS//,/ }; do
  for mode in default preserve; do
    b=${m}_op17_$mode out=$work/$b
    "$MIGC" convert "$tv/$b.onnx" --weights "$tv/$m.pth" --target mindspore -o "$out" > "$work/$b.log" 2>&1
    line=$(grep "convert: mindspore: .* statements" "$work/$b.log")
    if [[ $line != *" 0 not converted"* ]] || grep -q "custom-op" "$work/$b.log"; then
      bad "$b: ${line:-$(tail -1 "$work/$b.log")}; $(grep -m1 'mindspore: ' "$work/$b.log" | grep error)"
      continue
    fi
    r=$(/usr/bin/python3 tests/fixtures/ms_parity.py "$out" "torchvision:$m" "$tv/$m.pth" "$tv/$b.onnx" 2>&1 | tail -1)
    [[ $r == ok* ]] && ok "$b: ${r#ok }" || bad "$b: $r"
    rm -rf "$out"
  done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && rm -rf "$work"
[ $fail -eq 0 ]
