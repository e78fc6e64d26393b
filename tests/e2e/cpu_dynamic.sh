#!/bin/bash
# A symbolic batch in the CPU backend (codegen/c/cg_batch.c) as a user meets it:
# exports with dynamic_axes={'input': {0: 'batch'}} convert without --input-shape,
# and one compiled binary runs batch 1, 3 and 8, each within 1e-4 x max|output| of
# PyTorch; its arena is the static batch-1 plan's (at most +5%); a batch past the
# init maximum is an error code, with no output written; a node that mixes batch
# elements is reported and never run; transformer_encoder's batch, which its
# attention moves and merges with the heads, is dynamic too; with batch and sequence
# both symbolic, one binary runs seq 5, 9 and 32 at batch 1 and 2 (a seq past the init
# maximum is an error code, nothing written; the arena at the longest seq is the static plan's). The same under ASan+UBSan: migc's conversion and the
# generated code. --dynamic INPUT makes a static export's batch symbolic. Fixtures: tests/fixtures/export_dynamic.py, cached in build/fixtures/dyn.
# usage: tests/e2e/cpu_dynamic.sh BUILD_DIR [ASAN_BUILD_DIR]
#   CPU_DYNAMIC_MODELS="resnet18 mobilenet_v2" (default resnet18; make test-zoo: both)
set -u
BUILD=${1:-build}
ASAN=${2:-}
cd "$(dirname "$0")/../.."
BUILD=$(cd "$BUILD" && pwd)
[ -n "$ASAN" ] && ASAN=$(cd "$ASAN" && pwd)
MIGC=$BUILD/migc
NPYCMP=$BUILD/tests/npycmp
MODELS=${CPU_DYNAMIC_MODELS:-resnet18}
FX=build/fixtures/dyn
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. tests/e2e/check_lib.sh
if ! nice /usr/bin/python3 tests/fixtures/export_dynamic.py -o $FX \
       --models "tiny_cnn,batch_mix,transformer_encoder,transformer_encoder_batch,seq_double,$(echo $MODELS | tr ' ' ,)" > "$work/fx.log" 2>&1; then
  echo "FAIL fixtures: $(tail -3 "$work/fx.log")"
  exit 1
fi
arena() { sed -n 's/^#define MODEL_ARENA_BYTES \([0-9]*\)u$/\1/p' "$1/cpu/model.h"; }
# runs DIR BATCH MODEL [RUNNER FLAGS...]: the runner on MODEL's batch-BATCH input matches torch
runs() {
  local d=$1 b=$2 m=$3; shift 3
  rm -rf "$d/o$b" && "$d/cpu/runner" --input input=$FX/${m}_b${b}_input.npy --output-dir "$d/o$b" "$@" &&
    "$NPYCMP" "$d/o$b/output.npy" $FX/${m}_b${b}_output.npy --rel-max 1e-4 | tee -a "$work/figures" | grep -q ' ok'
}

for m in $MODELS; do
  d=$work/$m
  check "$m: dynamic batch converts without --input-shape, every node (--strict)" bash -c \
    "'$MIGC' convert $FX/${m}_dyn.onnx --cpu-only --strict -o '$d' 2>&1 | grep -q ', 0 not converted' &&
     grep -q '#define MODEL_N_DIMS 1' '$d/cpu/model.h' && make -s -C '$d/cpu' WERROR=-Werror >/dev/null"
  for b in 1 3 8; do check "$m: batch $b matches torch (one binary)" runs "$d" $b $m; done
  check "$m: one instance initialised for batch 8 runs batch 3" runs "$d" 3 $m --max-dim batch=8
  check "$m: batch 3 past an init maximum of 2: exit 3 (MG_RT_EARG), no output written" bash -c "
    '$d/cpu/runner' --input input=$FX/${m}_b3_input.npy --output-dir '$d/past' --max-dim batch=2 2>'$work/past.log'
    [ \$? -eq 3 ] && grep -q 'bad argument' '$work/past.log' && [ ! -e '$d/past/output.npy' ]"
  check "$m: arena at batch 1 within 5% of the static plan's" bash -c "
    '$MIGC' convert $FX/${m}_dyn.onnx --cpu-only --input-shape input=1x3x224x224 -o '$work/${m}_static' >/dev/null 2>&1 &&
    s=\$(sed -n 's/^#define MODEL_ARENA_BYTES \([0-9]*\)u\$/\1/p' '$work/${m}_static/cpu/model.h') &&
    y=\$(sed -n 's/^#define MODEL_ARENA_BYTES \([0-9]*\)u\$/\1/p' '$d/cpu/model.h') && echo \"static \$s dynamic \$y\" &&
    echo \"$m arena static \$s dynamic \$y\" >> '$work/figures' && [ \$((y * 100)) -le \$((s * 105)) ]"
done

check "--dynamic input: a static export (batch 2) runs batch 1, 2 and 5 in one binary, matching torch" bash -c "
  '$MIGC' convert $FX/tiny_cnn_static.onnx --dynamic input --cpu-only --strict -o '$work/sd' >/dev/null 2>&1 &&
  make -s -C '$work/sd/cpu' WERROR=-Werror >/dev/null && for b in 1 2 5; do
    '$work/sd/cpu/runner' --input input=$FX/tiny_cnn_b\${b}_input.npy --output-dir '$work/sd/o'\$b &&
    '$NPYCMP' '$work/sd/o'\$b/output.npy $FX/tiny_cnn_b\${b}_output.npy --rel-max 1e-4 || exit 1; done"
check "--dynamic naming no input, or an input --input-shape fixes: exit 2" bash -c "
  '$MIGC' convert samples/tiny_cnn.onnx --dynamic nope --cpu-only -o '$work/n1'; [ \$? -eq 2 ] &&
  '$MIGC' convert samples/tiny_cnn.onnx --dynamic input --input-shape input=1x3x32x32 --cpu-only -o '$work/n2'; [ \$? -eq 2 ]"
check "transformer_encoder, batch dynamic (seq 9): batch 1, 2, 5 in one binary match torch (the batch moves and merges with the heads)" bash -c "
  '$MIGC' convert $FX/transformer_encoder_batch_dyn.onnx --cpu-only --strict -o '$work/teb' >/dev/null 2>&1 &&
  make -s -C '$work/teb/cpu' WERROR=-Werror >/dev/null && for b in 1 2 5; do
    '$work/teb/cpu/runner' --input input=$FX/transformer_encoder_batch_b\${b}s9_input.npy --output-dir '$work/teb/o'\$b &&
    '$NPYCMP' '$work/teb/o'\$b/output.npy $FX/transformer_encoder_batch_b\${b}s9_output.npy --rel-max 1e-4 || exit 1; done"
check "nodes mixing batch elements (softmax over it, flip, sum over a merge, concat along it) are each reported; model_run stops (exit 3)" bash -c "
  '$MIGC' convert $FX/batch_mix_dyn.onnx --cpu-only -o '$work/mix' > '$work/mix.log' 2>&1
  for w in \"'/Softmax' (Softmax): cpu: symbolic batch 'batch': it normalises along the batch axis\" \\
           \"'/Slice' (Slice): cpu: symbolic batch 'batch': it slices the batch axis\" \\
           \"(Concat): cpu: symbolic batch 'batch': it runs along the batch axis\" \\
           \"(ReduceSum): cpu: symbolic batch 'batch': output\"; do grep -qF \"\$w\" '$work/mix.log' || exit 1; done
  [ \$(grep -c 'symbolic batch' '$work/mix.log') -eq 4 ] &&
  make -s -C '$work/mix/cpu' >/dev/null && '$work/mix/cpu/runner' --input input=$FX/batch_mix_b3_input.npy --output-dir '$work/mix/o'
  [ \$? -eq 3 ]"
# a symbolic sequence (codegen/c/cg_seq.c): batch and seq both symbolic, one binary
te=$work/te
check "transformer_encoder, batch and seq dynamic: converts (--strict), every node, seq 2..64 (MODEL_N_DIMS 2)" bash -c "
  '$MIGC' convert $FX/transformer_encoder_dyn.onnx --cpu-only --strict -o '$te' > '$work/te.log' 2>&1 &&
  grep -q ', 0 not converted' '$work/te.log' && ! grep -q 'symbolic sequence' '$work/te.log' &&
  grep -q '#define MODEL_N_DIMS 2' '$te/cpu/model.h' && grep -q '#define MODEL_SEQ_MIN 2' '$te/cpu/model.h' &&
  grep -q '#define MODEL_SEQ_MAX 64' '$te/cpu/model.h' && make -s -C '$te/cpu' WERROR=-Werror >/dev/null"
for t in b2s5 b2s9 b2s32 b1s32; do
  check "transformer_encoder: $t matches torch (one binary)" runs "$te" "${t#b}" transformer_encoder
done
check "transformer_encoder: one instance initialised for seq 32 and batch 4 runs b2s9" runs "$te" 2s9 transformer_encoder --max-dim seq=32 --max-dim batch=4
check "transformer_encoder: seq 32 past an init maximum of 9: exit 3 (MG_RT_EARG), no output written" bash -c "
  '$te/cpu/runner' --input input=$FX/transformer_encoder_b2s32_input.npy --output-dir '$te/past' --max-dim seq=9 2>'$work/past.log'
  [ \$? -eq 3 ] && grep -q 'bad argument' '$work/past.log' && [ ! -e '$te/past/output.npy' ]"
check "transformer_encoder: --max-seq 16, an init maximum of 32 is refused (exit 2), nothing written" bash -c "
  '$MIGC' convert $FX/transformer_encoder_dyn.onnx --cpu-only --max-seq 16 -o '$work/te16' >/dev/null 2>&1 &&
  grep -q '#define MODEL_SEQ_MAX 16' '$work/te16/cpu/model.h' && make -s -C '$work/te16/cpu' >/dev/null &&
  '$work/te16/cpu/runner' --input input=$FX/transformer_encoder_b2s32_input.npy --output-dir '$work/te16/o' 2>/dev/null
  [ \$? -eq 2 ] && [ ! -e '$work/te16/o/output.npy' ]"
check "transformer_encoder: arena at the longest seq (64) equals the static plan at 1x64x32, within 5%" bash -c "
  '$MIGC' convert $FX/transformer_encoder_dyn.onnx --cpu-only --input-shape input=1x64x32 -o '$work/te_static' >/dev/null 2>&1 &&
  s=\$(sed -n 's/^#define MODEL_ARENA_BYTES \([0-9]*\)u\$/\\1/p' '$work/te_static/cpu/model.h') &&
  y=\$(sed -n 's/^#define MODEL_ARENA_AT(S) ((size_t)\([0-9]*\)u)\$/\\1/p' '$te/cpu/model.h') && echo \"static \$s dynamic \$y\" &&
  echo \"transformer_encoder arena at seq 64: static \$s dynamic \$y\" >> '$work/figures' && [ \$((y * 100)) -le \$((s * 105)) ]"
check "a sequence that no single output axis of length seq holds (2 x seq) stays dynamic-shape, with why, never frozen" bash -c "
  '$MIGC' convert $FX/seq_double_dyn.onnx --cpu-only -o '$work/sd2' > '$work/sd2.log' 2>&1
  grep -q \"symbolic sequence 'seq': an input or output holds it otherwise\" '$work/sd2.log' &&
  grep -q 'dynamic-shape: value .input. has shape batchxseqx4' '$work/sd2.log'"
check "inspect: the seq dim is no dynamic-shape for the CPU target (cpu 100%)" bash -c "
  '$MIGC' inspect $FX/transformer_encoder_dyn.onnx 2>&1 | grep -q 'cpu 100%'"
check "--max-dim on a static model: exit 2" bash -c "
  '$MIGC' convert samples/tiny_cnn.onnx --cpu-only --input-shape input=1x3x32x32 -o '$work/st' >/dev/null 2>&1 &&
  make -s -C '$work/st/cpu' >/dev/null && '$work/st/cpu/runner' --input input=samples/tiny_cnn_input.npy --output-dir '$work/st/o' --max-dim batch=2
  [ \$? -eq 2 ]"
check "--max-dim batch=0: exit 2" bash -c "
  '$MIGC' convert samples/tiny_cnn.onnx --cpu-only -o '$work/tc' >/dev/null 2>&1 && make -s -C '$work/tc/cpu' >/dev/null &&
  '$work/tc/cpu/runner' --input input=$FX/tiny_cnn_b2_input.npy --output-dir '$work/tc/o' --max-dim batch=0
  [ \$? -eq 2 ]"
check "--trace: batch 1 writes every node's output, batch 2 is refused (exit 2)" bash -c "
  '$work/tc/cpu/runner' --input input=$FX/tiny_cnn_b1_input.npy --output-dir '$work/tc/o1' --trace '$work/tc/t1' &&
  ls '$work/tc/t1' | grep -q npy && '$NPYCMP' '$work/tc/o1/logits.npy' $FX/tiny_cnn_b1_output.npy --rel-max 1e-4 &&
  { '$work/tc/cpu/runner' --input input=$FX/tiny_cnn_b2_input.npy --output-dir '$work/tc/o2' --trace '$work/tc/t2'; [ \$? -eq 2 ]; }"

if [ -n "$ASAN" ]; then
  # the generated code with the sanitizers (small models: fast), converted by the sanitized migc
  SAN="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  check "ASan+UBSan migc: resnet18 with a symbolic batch converts, no report" bash -c \
    "'$ASAN/migc' convert $FX/resnet18_dyn.onnx --cpu-only --strict -o '$work/asan_r18' 2>&1 | grep -q ', 0 not converted'"
  # asan NAME ONNX OUTPUT MAX TAGS...: the sanitized migc converts ONNX, the project
  # builds with the sanitizers, and one binary initialised for batch MAX runs each
  # TAG's input (the last one's batch: MAX)
  asan() {
    local m=$1 f=$2 o=$3 max=$4 d=$work/asan_$1 b; shift 4
    if ! "$ASAN/migc" convert "$f" --cpu-only --strict -o "$d" > "$work/asan.log" 2>&1 ||
       ! make -s -C "$d/cpu" OPT="$SAN" LDFLAGS="-fsanitize=address,undefined" > "$work/asan.log" 2>&1; then
      fail=$((fail + 1)); echo "FAIL ASan+UBSan $m project"; head -5 "$work/asan.log"; return
    fi
    for b in "$@"; do
      check "ASan+UBSan: $m batch $b matches torch" bash -c "
        '$d/cpu/runner' --input input=$FX/${m}_b${b}_input.npy --output-dir '$d/o$b' --max-dim batch=$max &&
        '$NPYCMP' '$d/o$b/$o.npy' $FX/${m}_b${b}_output.npy --rel-max 1e-4"
    done
    check "ASan+UBSan: $m, a batch past a maximum of 1 is an error, nothing touched out of bounds" bash -c "
      '$d/cpu/runner' --input input=$FX/${m}_b${@: -1}_input.npy --output-dir '$d/past' --max-dim batch=1; [ \$? -eq 3 ]"
  }
  asan tiny_cnn samples/tiny_cnn.onnx logits 5 1 2 5
  asan transformer_encoder_batch $FX/transformer_encoder_batch_dyn.onnx output 5 1s9 5s9
  asan transformer_encoder $FX/transformer_encoder_dyn.onnx output 2 2s5 2s9 2s32
  check "ASan+UBSan: transformer_encoder, seq 32 past a maximum of 5 is an error, nothing written" bash -c "
    '$work/asan_transformer_encoder/cpu/runner' --input input=$FX/transformer_encoder_b2s32_input.npy \
      --output-dir '$work/asan_te_past' --max-dim seq=5; [ \$? -eq 3 ] && [ ! -e '$work/asan_te_past/output.npy' ]"
fi
[ -f "$work/figures" ] && sed 's/^/     /' "$work/figures"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
