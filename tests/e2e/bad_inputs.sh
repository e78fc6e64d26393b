#!/usr/bin/env bash
# tests/e2e/bad_inputs.sh MIGC: `MIGC inspect` on bad input must exit exactly 2 with
# an error diagnostic on stderr; never 0 (silently accepted), 1 or 3 (wrong status),
# nor die by a signal (a crash, status >= 128) or hang.
#
# Inputs, all made in a temporary directory:
#   (a) 30 conformance models (subgraphs, functions, sequences, a light_ model)
#       truncated at 10 sizes evenly spaced strictly between 0 and the full size.
#       A truncated protobuf can still decode as a different valid message; exit 0 is
#       accepted only when onnx.checker.check_model also accepts the truncated file;
#   (b) 10 files of seeded random bytes, 1 to 100000 bytes;
#   (c) an empty file;
#   (d) the models of tests/fixtures/make_bad_models.py, each of which must be
#       rejected with a diagnostic naming its problem, and its custom_op.onnx, which
#       must be accepted with MyOp in the output;
#   (e) a path that does not exist, and a directory.
#
# Prints one line per failure, then "N passed, N failed"; exit 1 if any failed
# (the temporary directory is then kept for the reproducers). Environment:
# CONFORMANCE (default ../shared/onnx-conformance next to the repo), PYTHON (default
# /usr/bin/python3, which has onnx).
set -u

if [ $# -ne 1 ]; then
  echo "usage: $0 MIGC" >&2
  exit 2
fi
MIGC=$(realpath "$1" 2>/dev/null) || MIGC=$1
if [ ! -x "$MIGC" ]; then
  echo "bad_inputs.sh: $1 is not an executable" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CONFORMANCE=${CONFORMANCE:-$ROOT/../shared/onnx-conformance}
PYTHON=${PYTHON:-/usr/bin/python3}
TIMEOUT=20 # seconds per migc run; anything slower counts as a hang

TMP=$(mktemp -d "${TMPDIR:-/tmp}/migc-bad-inputs.XXXXXX")
passed=0
failed=0
fail() { # fail WHAT WHY
  failed=$((failed + 1))
  echo "FAIL: $1: $2"
}
pass() { passed=$((passed + 1)); }

# run_migc FILE: runs `migc inspect FILE`; sets rc and out (stdout); stderr is
# left in $TMP/err.
run_migc() {
  timeout "$TIMEOUT" "$MIGC" inspect "$1" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  out=$(cat "$TMP/out")
}

# status_problem: why rc is wrong for a rejected input, or nothing if it is 2.
status_problem() {
  case $rc in
    2) ;;
    0) echo "exit 0: accepted" ;;
    124) echo "hang: no result in ${TIMEOUT}s" ;;
    1 | 3) echo "exit $rc instead of 2" ;;
    *) if [ "$rc" -ge 128 ]; then echo "crash: killed by signal $((rc - 128))"
       else echo "exit $rc instead of 2"; fi ;;
  esac
}

# judge_reject LABEL [WORD]: the run_migc just done must have exited 2 with an
# error[...] line on stderr, and one such line must contain WORD if given.
judge_reject() {
  local label=$1 word=${2:-}
  local why
  why=$(status_problem)
  if [ -n "$why" ]; then
    fail "$label" "$why; stderr: $(head -n 1 "$TMP/err" | cut -c1-200)"
  elif ! grep -q 'error\[[a-z-]*\]' "$TMP/err"; then
    fail "$label" "exit 2 but no error[...] diagnostic on stderr: '$(head -n 1 "$TMP/err" | cut -c1-200)'"
  elif [ -n "$word" ] && ! grep 'error\[' "$TMP/err" | grep -qiF -- "$word"; then
    fail "$label" "diagnostic does not mention '$word': $(grep -m1 'error\[' "$TMP/err" | cut -c1-200)"
  else
    pass
  fi
}

# expect_reject LABEL FILE [WORD]: runs migc on FILE and judges it as above.
expect_reject() {
  run_migc "$2"
  judge_reject "$1" "${3:-}"
}

# --- (a) truncated conformance models --------------------------------------------
SAMPLE=(
  node/test_loop11 node/test_if node/test_scan9_sum node/test_if_seq
  node/test_loop13_seq node/test_scan_sum node/test_sequence_map_add_2_sequences
  node/test_conv_with_strides_padding node/test_convtranspose_pads
  node/test_batchnorm_example node/test_gemm_default_scalar_bias
  node/test_reshape_extended_dims node/test_resize_upsample_scales_linear
  node/test_lstm_defaults node/test_gru_defaults node/test_slice node/test_gather_0
  node/test_split_equal_parts_1d node/test_softmax_axis_0
  node/test_layer_normalization_2d_axis0 node/test_maxpool_2d_pads
  node/test_einsum_batch_diagonal node/test_cast_FLOAT_to_STRING
  node/test_constantofshape_int_zeros node/test_range_float_type_positive_delta_expanded
  node/test_dropout_default_mask pytorch-converted/test_Conv2d
  pytorch-operator/test_operator_repeat_dim_overflow simple/test_sequence_model1
  light/light_squeezenet.onnx
)
mkdir -p "$TMP/trunc"
accepted=() # truncated files migc accepted: legitimate only if onnx's checker agrees
for s in "${SAMPLE[@]}"; do
  src=$CONFORMANCE/$s
  [ -d "$src" ] && src=$src/model.onnx
  if [ ! -f "$src" ]; then
    fail "truncate $s" "sample model missing: $src"
    continue
  fi
  size=$(stat -c %s "$src")
  name=${s//\//__}
  name=${name%.onnx}
  for k in 1 2 3 4 5 6 7 8 9 10; do
    cut_at=$((size * k / 11)) # evenly spaced, strictly inside (0, size)
    [ "$cut_at" -ge 1 ] || cut_at=1
    f=$TMP/trunc/$name.$cut_at.onnx
    head -c "$cut_at" "$src" >"$f"
    run_migc "$f"
    if [ "$rc" -eq 0 ]; then
      accepted+=("$f")
    else
      judge_reject "truncate $s at $cut_at/$size"
    fi
  done
done
# One python run checks every accepted truncation (importing onnx is the slow part).
if [ "${#accepted[@]}" -gt 0 ]; then
  "$PYTHON" - "${accepted[@]}" >"$TMP/checker" 2>&1 <<'EOF'
import sys
import onnx
for path in sys.argv[1:]:
    try:
        onnx.checker.check_model(onnx.load(path))
        print("valid", path)
    except Exception as e:  # any failure to load or check: not a valid model
        print("invalid", path, str(e).splitlines()[0][:150] if str(e) else type(e).__name__)
EOF
  for f in "${accepted[@]}"; do
    verdict=$(grep -F " $f" "$TMP/checker" | head -n 1)
    case $verdict in
      valid*) pass ;;
      invalid*) fail "truncate ${f##*/}" "exit 0, but onnx.checker rejects it (${verdict#invalid "$f" })" ;;
      *) fail "truncate ${f##*/}" "exit 0, and the onnx checker gave no verdict: $(tail -n 1 "$TMP/checker")" ;;
    esac
  done
fi

# --- (b) seeded random bytes -----------------------------------------------------
mkdir -p "$TMP/random"
if "$PYTHON" - "$TMP/random" <<'EOF'; then
import random, sys
for i, n in enumerate([1, 7, 64, 255, 1000, 4096, 12345, 40000, 65536, 100000]):
    r = random.Random(1000 + i)
    with open(f"{sys.argv[1]}/random_{n}.bin", "wb") as f:
        f.write(bytes(r.getrandbits(8) for _ in range(n)))
EOF
  for f in "$TMP"/random/random_*.bin; do
    expect_reject "random ${f##*/}" "$f"
  done
else
  fail "random" "could not generate the random files with $PYTHON"
fi

# --- (c) empty file --------------------------------------------------------------
: >"$TMP/empty.onnx"
expect_reject "empty file" "$TMP/empty.onnx" empty

# --- (d) hand-made bad models ----------------------------------------------------
BAD=$TMP/bad
MAKE_BAD=$ROOT/tests/fixtures/make_bad_models.py
if [ ! -f "$MAKE_BAD" ]; then
  fail "make_bad_models" "$MAKE_BAD does not exist"
elif ! "$PYTHON" "$MAKE_BAD" -o "$BAD" >"$TMP/make_bad.log" 2>&1; then
  fail "make_bad_models" "$MAKE_BAD failed: $(tail -n 1 "$TMP/make_bad.log")"
else
  while read -r model word; do
    if [ ! -f "$BAD/$model" ]; then
      fail "bad model $model" "make_bad_models.py did not write it"
      continue
    fi
    [ "$word" = - ] && word=
    expect_reject "bad model $model" "$BAD/$model" "$word"
  done <<'EOF'
dangling.onnx ghost
cycle.onnx cycle
unknown_domain.onnx com.example.undeclared
future_opset.onnx opset
concat_no_axis.onnx axis
external_missing.onnx external
external_escape.onnx leaves the model
empty.onnx -
random.onnx -
EOF
  # The one good model there: an op migc does not know is reported, not an error.
  if [ ! -f "$BAD/custom_op.onnx" ]; then
    fail "custom_op.onnx" "make_bad_models.py did not write it"
  else
    run_migc "$BAD/custom_op.onnx"
    if [ "$rc" -ne 0 ]; then
      fail "custom_op.onnx" "exit $rc instead of 0: $(head -n 1 "$TMP/err" | cut -c1-200)"
    elif ! printf '%s\n' "$out" | grep -qF MyOp; then
      fail "custom_op.onnx" "exit 0 but the inspect output does not name MyOp"
    else
      pass
    fi
  fi
fi

# --- (e) paths that are not model files ------------------------------------------
expect_reject "nonexistent path" "$TMP/no/such/model.onnx" "error[io]"
mkdir -p "$TMP/a_directory.onnx"
expect_reject "directory path" "$TMP/a_directory.onnx" "error[io]"

echo "$passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
  echo "(inputs kept in $TMP)"
  exit 1
fi
rm -rf "$TMP"
exit 0
