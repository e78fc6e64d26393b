#!/bin/bash
# Reference-interpreter speed and memory on torchvision resnet50 (batch 1, 224x224,
# one core), with the peers measured in the same run: ONNX Runtime (onnxruntime-node,
# one thread) and PyTorch (torch.set_num_threads(1)). The interpreter is a yardstick,
# not a fast path: it computes in double. Five runs each, median reported.
# usage: bench/interp_speed.sh BUILD_DIR
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tv=build/fixtures/tv
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models resnet50 --opsets 17 --modes default --refs >/dev/null
[ -d bench/node_modules/onnxruntime-node ] || (cd bench && npm install --ignore-scripts --no-audit --no-fund >/dev/null)
model=$tv/resnet50_op17_default.onnx input=$tv/resnet50_input.npy
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
t=() m=()
for _ in 1 2 3 4 5; do
  taskset -c 0 /usr/bin/time -o build/time.txt -f '%e %M' "$BUILD/migc" run "$model" --input input="$input" --output-dir build/bench-r50 --force >/dev/null
  read -r s kb < build/time.txt; t+=("$s"); m+=("$kb")
done
weights=$(stat -c %s "$model")
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), one core (taskset -c 0)"
echo "| resnet50, batch 1 | median |"
echo "|---|---|"
echo "| migc run (reference interpreter, wall incl. load) | $(printf '%s\n' "${t[@]}" | median) s |"
echo "| migc run peak RSS | $(printf '%s\n' "${m[@]}" | median | awk '{printf "%.0f MB", $1/1024}') (model file $((weights / 1000000)) MB; budget 3x weights + 200 MB = $((3 * weights / 1000000 + 200)) MB) |"
echo "| ONNX Runtime 1 thread (forward only) | $(taskset -c 0 node bench/ort_run.js "$model" "$input" 5 | awk '{print $2}') ms |"
echo "| PyTorch 1 thread (forward only) | $(taskset -c 0 /usr/bin/python3 bench/torch_run.py resnet50 "$tv/resnet50.pth" "$input" 5 | awk '{print $2}') ms |"
"$BUILD/tests/npycmp" build/bench-r50/output.npy "$tv/resnet50_output.npy" | sed 's/^/agreement with torch: /'
