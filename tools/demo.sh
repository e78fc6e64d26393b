#!/bin/bash
# `make demo`: the main job on the bundled sample. Until conversion lands, that is
# import, shape inference and inspection of samples/tiny_cnn*.onnx.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
echo "== migc inspect samples/tiny_cnn.onnx (default torch export, dynamic batch)"
"$BUILD/migc" inspect samples/tiny_cnn.onnx
echo
echo "== the same with the batch fixed: every intermediate shape becomes static"
"$BUILD/migc" inspect samples/tiny_cnn.onnx --input-shape input=4x3x32x32 | grep -E 'logits|shapes'
echo
echo "== migc inspect samples/tiny_cnn_preserve.onnx --json (TrainingMode.PRESERVE export)"
"$BUILD/migc" inspect samples/tiny_cnn_preserve.onnx --json | head -40
echo
echo "== migc run: the reference interpreter on samples/tiny_cnn_input.npy, against torch's output"
out=$(mktemp -d)
"$BUILD/migc" run samples/tiny_cnn.onnx --input input=samples/tiny_cnn_input.npy --output-dir "$out"
"$BUILD/tests/npycmp" "$out/logits.npy" samples/tiny_cnn_logits.npy
rm -rf "$out"
