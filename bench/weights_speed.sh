#!/bin/bash
# `migc weights` throughput and peak memory on torchvision resnet50 (~100 MB) and a
# synthetic 2 GiB state_dict (eight 256 MiB tensors), warm cache, against the Python
# path (torch.load + protobuf serialisation) in the same run. Three runs, median.
# usage: bench/weights_speed.sh BUILD_DIR
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
dir=build/bench/weights
mkdir -p "$dir"
tv=build/fixtures/tv
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models resnet50 --opsets 17 --modes default >/dev/null
[ -f "$dir/big2g.pth" ] || /usr/bin/python3 -c "
import torch; g = torch.Generator().manual_seed(0)
torch.save({'layer%d.weight' % i: torch.randn(8192, 8192, generator=g) for i in range(8)}, '$dir/big2g.pth')"
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
row() { # label src largest_bytes output command...
  local label=$1 src=$2 largest=$3 out=$4; shift 4
  local t=() m=()
  if ! "$@" >/dev/null 2>"$dir/err"; then # also warms the page cache
    printf '| %-34s | fails: %s |\n' "$label" "$(tail -1 "$dir/err" | cut -c1-100)"; return 0
  fi
  for _ in 1 2 3; do
    rm -f "$out"; sync # replacing a 2 GB file, and earlier dirty pages, are not the run's cost
    /usr/bin/time -o "$dir/time.txt" -f '%e %M' "$@" >/dev/null 2>&1
    read -r s kb < "$dir/time.txt"; t+=("$s"); m+=("$kb")
  done
  local ts mk bytes
  ts=$(printf '%s\n' "${t[@]}" | median); mk=$(printf '%s\n' "${m[@]}" | median)
  bytes=$(stat -c %s "$src")
  printf '| %-34s | %7.2f s | %6.2f GB/s | %7.0f MB | %7.0f MB |\n' "$label" "$ts" \
    "$(awk -v b="$bytes" -v s="$ts" 'BEGIN { print (s > 0 ? b / s / 1e9 : 0) }')" "$(awk -v k="$mk" 'BEGIN { print k / 1024 }')" \
    "$(awk -v l="$largest" 'BEGIN { print l / 1048576 + 64 }')"
}
r50_largest=$((2048 * 1000 * 4))   # fc.weight is the largest tensor of resnet50
big_largest=$((8192 * 8192 * 4))
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
echo "| run | median time | throughput | median peak RSS | budget (largest tensor + 64 MB) |"
echo "|---|---|---|---|---|"
row "floor: cat resnet50.pth > copy" "$tv/resnet50.pth" $r50_largest "$dir/copy.bin" sh -c "cat '$tv/resnet50.pth' > '$dir/copy.bin'"
row "migc weights resnet50.pth" "$tv/resnet50.pth" $r50_largest "$dir/r50.ckpt" "$BUILD/migc" weights "$tv/resnet50.pth" -o "$dir/r50.ckpt" --force
row "python torch.load+protobuf resnet50" "$tv/resnet50.pth" $r50_largest "$dir/r50_py.ckpt" /usr/bin/python3 bench/py_ckpt.py "$tv/resnet50.pth" "$dir/r50_py.ckpt"
row "floor: cat 2 GiB .pth > copy" "$dir/big2g.pth" $big_largest "$dir/copy.bin" sh -c "cat '$dir/big2g.pth' > '$dir/copy.bin'"
row "migc weights 2 GiB state_dict" "$dir/big2g.pth" $big_largest "$dir/big.ckpt" "$BUILD/migc" weights "$dir/big2g.pth" -o "$dir/big.ckpt" --force
row "python torch.load+protobuf 2 GiB" "$dir/big2g.pth" $big_largest "$dir/big_py.ckpt" /usr/bin/python3 bench/py_ckpt.py "$dir/big2g.pth" "$dir/big_py.ckpt"
"$BUILD/migc" ckpt diff "$dir/r50.ckpt" "$dir/r50_py.ckpt" >/dev/null 2>&1 && echo "resnet50: migc's and the Python path's checkpoints hold the same tensors" ||
  echo "note: the checkpoints differ in names (migc renames BatchNorm parameters to MindSpore names; the Python path does not)"
