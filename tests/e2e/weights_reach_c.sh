#!/bin/bash
# `convert --weights` puts the .pth's tensors into the generated C (issue 18): a
# stale resnet18 export (both styles) with a fine-tuned .pth must compute the
# fine-tuned model's output, folded BatchNorms recomputed from the .pth; without
# --weights it computes the stale one (the check can fail); an initializer the .pth
# cannot bind is a warning naming it, and --strict fails on it.
# usage: tests/e2e/weights_reach_c.sh BUILD_DIR
set -u -o pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$BUILD/migc CMP=$BUILD/tests/npycmp
fx=build/fixtures/finetuned
want=$(sha256sum tests/fixtures/make_finetuned.py tests/fixtures/export_torchvision.py | sha256sum | cut -c1-16)
if [ "$(cat "$fx/.stamp" 2>/dev/null)" != "$want" ]; then
  rm -rf "$fx"
  /usr/bin/python3 tests/fixtures/make_finetuned.py "$fx" 2>/dev/null || { echo "fixture failed"; exit 1; }
  echo "$want" > "$fx/.stamp"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
check() { # name command...
  local name=$1; shift
  if "$@" > "$work/last.log" 2>&1; then echo "ok   $name"; pass=$((pass + 1))
  else echo "FAIL $name"; sed 's/^/     /' "$work/last.log" | tail -5; fail=$((fail + 1)); fi
}
run_c() { # onnx outdir [convert args...]: converts, builds, runs
  local onnx=$1 out=$2; shift 2
  "$MIGC" convert "$onnx" --input-shape input=1x3x64x64 -o "$out" "$@" > "$out.log" 2>&1 &&
    make -s -C "$out/cpu" -j2 > /dev/null 2>&1 &&
    "$out/cpu/runner" --input input="$fx/resnet18_input.npy" --output-dir "$out/run" > /dev/null
}
for mode in default preserve; do
  onnx=$fx/resnet18_$mode.onnx
  check "$mode: stale export + fine-tuned .pth converts and builds" \
    run_c "$onnx" "$work/$mode" --weights "$fx/resnet18_finetuned.pth"
  check "$mode: the C computes the fine-tuned model" \
    "$CMP" "$work/$mode/run/output.npy" "$fx/resnet18_finetuned_output.npy"
  check "$mode: convert says the export's values differ from the .pth" \
    grep -q "bound by name or torch scope, not by equal values" "$work/$mode.log"
  check "$mode: weight_map.json marks the structural bindings" \
    grep -q '"by_structure": true' "$work/$mode/weight_map.json"
  run_c "$onnx" "$work/${mode}_nopth" > /dev/null 2>&1
  if "$CMP" "$work/${mode}_nopth/run/output.npy" "$fx/resnet18_finetuned_output.npy" > /dev/null 2>&1; then
    echo "FAIL $mode: the stale export's C matches the fine-tuned output (the check cannot fail)"; fail=$((fail + 1))
  else pass=$((pass + 1)); fi
  check "$mode: ... and matches the stale model" \
    "$CMP" "$work/${mode}_nopth/run/output.npy" "$fx/resnet18_stale_output.npy"
  check "$mode: a .pth without fc.bias: exit 0 and a warning naming the initializer" \
    bash -c "'$MIGC' convert '$onnx' --input-shape input=1x3x64x64 -o '$work/${mode}_mb' --cpu-only \
      --weights '$fx/resnet18_missing_bias.pth' 2>&1 | grep -q \"'fc.bias': graph initializer bound to no source tensor: no tensor of\""
  check "$mode: ... and --strict exits 2" \
    bash -c "'$MIGC' convert '$onnx' --input-shape input=1x3x64x64 -o '$work/${mode}_mbs' --strict \
      --weights '$fx/resnet18_missing_bias.pth' > /dev/null 2>&1; [ \$? -eq 2 ]"
done
# seq_lstm: ONNX LSTM weights are torch's gates reordered and packed (issue 11 item 7)
for mode in default preserve; do
  check "seq_lstm $mode: weights --graph binds every graph initializer" bash -c \
    "'$MIGC' weights '$fx/seq_lstm.pth' --graph '$fx/seq_lstm_$mode.onnx' -o '$work/sl_$mode.ckpt' 2>&1 | \
     grep -qE 'binding: ([0-9]+) of \\1 graph initializers bound \\(0 constants, 0 unbound\\)'"
  check "seq_lstm $mode: a fine-tuned .pth reaches the C (gates reordered from the .pth)" bash -c \
    "'$MIGC' convert '$fx/seq_lstm_$mode.onnx' --weights '$fx/seq_lstm_finetuned.pth' -o '$work/sl_$mode' --cpu-only \
       >/dev/null 2>&1 && make -s -C '$work/sl_$mode/cpu' >/dev/null 2>&1 && \
     '$work/sl_$mode/cpu/runner' --input input='$fx/seq_lstm_tokens.npy' --output-dir '$work/sl_$mode/run' >/dev/null && \
     '$CMP' \$(ls '$work/sl_$mode/run/'*.npy) '$fx/seq_lstm_finetuned_output.npy'"
done
check "weights without --graph names each lone 2-D weight as ambiguous (Embedding or Linear)" bash -c \
  "'$MIGC' weights '$fx/embedding.pth' -o '$work/emb.ckpt' 2>&1 > /dev/null | grep -c 'nn.Embedding .* or a bias-free nn.Linear' | grep -qx 2"
check "... and names emb.weight" bash -c \
  "'$MIGC' weights '$fx/embedding.pth' -o '$work/emb2.ckpt' 2>&1 | grep -q \"'emb.weight': a lone 2-D weight\""
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
