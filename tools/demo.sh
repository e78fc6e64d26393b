#!/bin/bash
# `make demo`: the main job on the bundled sample (samples/tiny_cnn: a small CNN
# exported from torch, with its .pth and torch's output for one input).
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
out=build/demo
rm -rf "$out"
echo "== migc inspect samples/tiny_cnn.onnx (default torch export, dynamic batch)"
"$BUILD/migc" inspect samples/tiny_cnn.onnx
echo
echo "== migc convert: C for CPUs, a MindSpore checkpoint and net.py, an aclnn program for Ascend, a coverage report"
"$BUILD/migc" convert samples/tiny_cnn.onnx --weights samples/tiny_cnn.pth --input-shape input=1x3x32x32 \
  --target cpu,mindspore,ascend -o "$out"
ls -l "$out" "$out/cpu" "$out/ascend"
echo
echo "== make -C $out/cpu (C99, builds anywhere; runtime kernels copied in)"
make -s -C "$out/cpu"
echo
echo "== the generated runner on samples/tiny_cnn_input.npy, against torch's output"
"$out/cpu/runner" --input input=samples/tiny_cnn_input.npy --output-dir "$out/run" --repeat 100
"$BUILD/tests/npycmp" "$out/run/logits.npy" samples/tiny_cnn_logits.npy
echo
echo "== the reference interpreter on the same input"
"$BUILD/migc" run samples/tiny_cnn.onnx --input input=samples/tiny_cnn_input.npy --output-dir "$out/interp"
"$BUILD/tests/npycmp" "$out/interp/logits.npy" samples/tiny_cnn_logits.npy
echo
echo "== the Ascend program, built against the aclnn emulator (make emu; on CANN: cmake)"
make -s -C "$out/ascend" emu
"$out/ascend/runner" --input input=samples/tiny_cnn_input.npy --output-dir "$out/ascend-run"
"$BUILD/tests/npycmp" "$out/ascend-run/logits.npy" samples/tiny_cnn_logits.npy
echo
echo "== the checkpoint, as MindSpore will load it"
"$BUILD/migc" ckpt dump "$out/model.ckpt"
echo
echo "== coverage per target ($out/coverage.md)"
head -20 "$out/coverage.md"
