#!/bin/bash
# migc convert --target mindspore: OUTDIR/mindspore/net.py and run.py, run through
# the MindSpore stand-in (tests/mindspore_standin) against PyTorch: tiny_cnn and the
# PRESERVE exports of resnet18 and mobilenet_v2 with their .pth (within 1e-4 x max
# and cosine 0.99999, every parameter loaded, no checkpoint tensor unused); net.py
# passes pyflakes3; a default export's folded BatchNorms become nn.BatchNorm2d layers
# again; anonymous parameter names are reported, and --strict exits 2.
# usage: tests/e2e/mindspore_net.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$BUILD/migc
work=$(mktemp -d "${TMPDIR:-/tmp}/migc-msnet.XXXXXX") tv=build/fixtures/tv
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models resnet18,mobilenet_v2 --opsets 17 \
  --modes preserve >/dev/null || { echo "export failed"; exit 1; }

convert() { # NAME ONNX PTH: convert for mindspore into $work/NAME
  "$MIGC" convert "$2" --weights "$3" --target mindspore -o "$work/$1" > "$work/$1.log" 2>&1
}
parity() { # NAME what a ONNX
  local r; r=$(/usr/bin/python3 tests/fixtures/ms_parity.py "$work/$1" "$2" "$3" "$4" 2>&1 | tail -1)
  [[ $r == ok* ]] && ok "$1: net.py under the stand-in matches torch: ${r#ok }" || bad "$1: $r"
}

if convert tiny samples/tiny_cnn_preserve.onnx samples/tiny_cnn.pth && grep -q "0 not converted" "$work/tiny.log"; then
  ok "tiny_cnn (PRESERVE): every node converted ($(grep 'mindspore:' "$work/tiny.log" | head -1 | sed 's/.*mindspore: //'))"
else bad "tiny_cnn: $(tail -2 "$work/tiny.log")"; fi
parity tiny npy:samples/tiny_cnn_input.npy samples/tiny_cnn_logits.npy samples/tiny_cnn_preserve.onnx
if pyflakes3 "$work/tiny/mindspore/net.py" "$work/tiny/mindspore/run.py" > "$work/flakes" 2>&1; then
  ok "net.py and run.py pass pyflakes3"
else bad "pyflakes3: $(head -3 "$work/flakes")"; fi
# a parameter renamed in the script is a load failure naming it, not a silent default
sed 's/self\.fc = /self.fc_renamed = /; s/self\.fc(/self.fc_renamed(/' "$work/tiny/mindspore/net.py" > "$work/net_mut.py"
cp -r "$work/tiny" "$work/tiny_mut" && cp "$work/net_mut.py" "$work/tiny_mut/mindspore/net.py"
r=$(/usr/bin/python3 tests/fixtures/ms_parity.py "$work/tiny_mut" npy:samples/tiny_cnn_input.npy \
  samples/tiny_cnn_logits.npy samples/tiny_cnn_preserve.onnx 2>&1 | tail -1)
[[ $r == FAIL\ run.py:*fc* ]] && ok "a parameter that is not in the checkpoint fails run.py, named: ${r#FAIL run.py: }" ||
  bad "renamed parameter: $r"

for m in resnet18 mobilenet_v2; do
  if convert $m "$tv/${m}_op17_preserve.onnx" "$tv/$m.pth" && grep -q " 0 not converted" "$work/$m.log"; then
    parity $m torchvision:$m "$tv/$m.pth" "$tv/${m}_op17_preserve.onnx"
  else bad "$m: $(grep -m2 'error\|mindspore:' "$work/$m.log")"; fi
done

# the default export folds each BatchNorm into its Conv: unfolded into nn.BatchNorm2d
# layers of the .pth's own tensors, so the net trains as torch's does
"$MIGC" convert samples/tiny_cnn.onnx --weights samples/tiny_cnn.pth --target mindspore -o "$work/folded" \
  > "$work/folded.log" 2>&1
nbn=$(grep -c "= mindspore.nn.BatchNorm2d(" "$work/folded/mindspore/net.py")
if grep -q " 0 not converted" "$work/folded.log" && [ "$nbn" = 2 ] &&
   grep -q "2 BatchNorms the export folded into a Conv unfolded" "$work/folded.log"; then
  ok "default export: both folded BatchNorms unfolded into nn.BatchNorm2d"
else bad "folded BatchNorm: $nbn BatchNorm2d; $(grep -m2 'mindspore' "$work/folded.log")"; fi
parity folded npy:samples/tiny_cnn_input.npy samples/tiny_cnn_logits.npy samples/tiny_cnn.onnx
# an export's anonymous parameter names (no --weights) cannot name the cells: reported, and --strict exits 2
"$MIGC" convert samples/tiny_cnn.onnx --target mindspore -o "$work/anon" > "$work/anon.log" 2>&1
if grep -q "error\[unsupported\].*mindspore: .*no torch module path" "$work/anon.log" &&
   grep -q "raise NotImplementedError(\"node" "$work/anon/mindspore/net.py"; then
  ok "anonymous parameter names are reported and net.py raises there"
else bad "anonymous names: $(grep -m2 'mindspore' "$work/anon.log")"; fi
"$MIGC" convert samples/tiny_cnn.onnx --target mindspore --strict -o "$work/strict" > /dev/null 2>&1
[ $? -eq 2 ] && ok "--strict --target mindspore exits 2 on it" || bad "--strict --target mindspore did not exit 2"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && rm -rf "$work"
[ $fail -eq 0 ]
