#!/bin/bash
# `make test-zoo`: the heavier model-zoo runs kept out of `make test`. Every
# torchvision model the fixture script knows (but vit_l_16, 1.2 GB) through the
# reference interpreter and through generated C, each against PyTorch, the Ascend
# program under the aclnn emulator, then one coverage report over the whole zoo.
# usage: tests/e2e/zoo.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/zoo_lists.sh
ZOO=$ZOO_FULL
rc=0
echo "=== reference interpreter against PyTorch"
bash tests/e2e/torchvision_interp.sh "$BUILD" "$ZOO" || rc=1
echo "=== generated C against PyTorch"
bash tests/e2e/torchvision_c.sh "$BUILD" "$ZOO" || rc=1
echo "=== Resize against torch and the specification, 1000 random cases"
bash tests/e2e/resize_diff.sh "$BUILD/migc" 1000 7 || rc=1
echo "=== parity gate (migc verify --grad) on issue 7's acceptance models"
bash tests/e2e/parity_zoo.sh "$BUILD" || rc=1
echo "=== torchvision exports at opset 13 too (make test takes the smaller models only)"
bash tests/e2e/torchvision_inspect.sh "$BUILD/migc" "$ZOO" "$ZOO" || rc=1
echo "=== vit_b_16's generated C under qemu-aarch64 too (five minutes)"
bash tests/e2e/generated_portability.sh "$BUILD" resnet18,vit_b_16 resnet18,vit_b_16 || rc=1
echo "=== coverage reports and coverage-convert agreement over the whole zoo"
MIGC_ZOO=$ZOO bash tests/e2e/coverage.sh "$BUILD" || rc=1
MIGC_ZOO=$ZOO bash tests/e2e/coverage_agreement.sh "$BUILD" || rc=1
echo "=== detection models at opsets 13 and 17 (make test takes 17)"
bash tests/e2e/detection.sh "$BUILD" || rc=1
echo "=== Ascend: the emulated aclnn program against PyTorch over issue 13's twelve models"
bash tests/e2e/ascend_parity.sh "$BUILD" resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,squeezenet1_1,shufflenet_v2_x1_0,densenet121,vit_b_16,convnext_tiny,swin_t,deeplabv3_mobilenet_v3_large || rc=1
echo "=== Ascend conformance over all 922 node tests (make test takes every fourth)"
bash tests/e2e/ascend_conformance.sh "$BUILD/migc" || rc=1
echo "=== coverage over the zoo (build/zoo-coverage.md)"
models=()
for m in ${ZOO//,/ }; do models+=("build/fixtures/tv/${m}_op17_default.onnx"); done
"$BUILD/migc" coverage "${models[@]}" --force -o build/zoo-coverage.md || rc=1
head -30 build/zoo-coverage.md
exit $rc
