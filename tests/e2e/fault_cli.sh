#!/bin/bash
# Allocation failures through the command line (issue 16, acceptance 4): every
# command that reads or writes models (inspect, run, coverage, weights with a graph,
# convert for all three targets, verify with its reports, ckpt dump, precision) is run with
# MIGC_FAULT_AT=N, which fails the Nth allocation (core/arena.h), for N = 1..30
# and then every ~12% further up to the number of allocations the command makes
# (FAULT_EVERY=1: every one of them).
# Each failure must exit 2 or 3 with an error line on stderr, or exit 0 with the
# very outputs of a run without a fault; never a sanitizer report (run it on the
# ASan+UBSan build), never a temporary file left.
# The unit sweeps (test_faults, test_import, test_codegen...) fail every
# allocation from N on; this one fails a single allocation, as a real shortage
# might, so that the error's own diagnostic can be recorded and printed.
# usage: tests/e2e/fault_cli.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$(realpath "$BUILD/migc")
S=$(pwd)/samples
work=$(mktemp -d "${TMPDIR:-/tmp}/migc-faultcli.XXXXXX")
pass=0 fail=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

/usr/bin/python3 - "$work" "$S" <<'PY' || { echo "FAIL fixture"; exit 1; }
import sys, numpy as np
w, s = sys.argv[1], sys.argv[2]
np.savez(w + "/ref.npz", **{"inputs/input": np.load(s + "/tiny_cnn_input.npy"),
                            "outputs/logits": np.load(s + "/tiny_cnn_logits.npy")})
PY
"$MIGC" weights "$S/tiny_cnn.pth" -o "$work/w.ckpt" > /dev/null 2>&1 || { echo "FAIL fixture checkpoint"; exit 1; }

# digest OUTDIR STDOUT_TOO: what a run made (files, and stdout unless "-"),
# without what carries a time (verify's reports and table, weights' summary)
digest() {
  { [ "$2" = - ] || cat "$work/out.txt"
    (cd "$1" && find . -type f ! -name 'v.json' ! -name 'v.xml' | LC_ALL=C sort | xargs -r sha256sum); } | sha256sum
}

# sweep NAME OUTDIR STDOUT_TOO CMD...: CMD once without a fault (MIGC_FAULT_AT=0
# says how many allocations it makes, T), then with allocation N failing for N =
# 1..30 and every ~12% further up to T (FAULT_EVERY=1: all), OUTDIR emptied
# before each run. A run
# must exit 2 or 3 with an error line, or exit 0 having made exactly what the
# run without a fault made (an allocation whose failure is tolerated changes
# nothing); never a sanitizer report, never a temporary file left.
sweep() {
  local name=$1 out=$2 with_stdout=$3; shift 3
  local n=1 runs=0 tolerated=0 bad_one="" rc start=$SECONDS total base
  rm -rf "$out" && mkdir -p "$out"
  MIGC_FAULT_AT=0 "$@" > "$work/out.txt" 2> "$work/err.txt" || { fail=$((fail + 1)); echo "FAIL $name: fails without a fault: $(tail -1 "$work/err.txt")"; return; }
  total=$(sed -n 's/^migc: allocations: //p' "$work/err.txt")
  base=$(digest "$out" "$with_stdout")
  while [ "$n" -le "$total" ]; do
    rm -rf "$out" && mkdir -p "$out"
    MIGC_FAULT_AT=$n timeout 120 "$@" > "$work/out.txt" 2> "$work/err.txt"; rc=$?
    runs=$((runs + 1))
    if grep -qE "AddressSanitizer|LeakSanitizer|runtime error:" "$work/err.txt"; then
      bad_one="N=$n: a sanitizer spoke: $(grep -m1 -E "ERROR|runtime error" "$work/err.txt")"; break
    fi
    if compgen -G "$out/.*.tmp-*" > /dev/null || compgen -G "$out/*/.*.tmp-*" > /dev/null; then
      bad_one="N=$n: left a temporary file"; break
    fi
    if [ $rc -eq 0 ]; then
      [ "$(digest "$out" "$with_stdout")" = "$base" ] || { bad_one="N=$n: exit 0 but its outputs differ from a run without a fault"; break; }
      tolerated=$((tolerated + 1))
    elif [ $rc -ne 2 ] && [ $rc -ne 3 ]; then bad_one="N=$n: exit $rc, want 2 or 3 ($(tail -1 "$work/err.txt"))"; break
    elif ! grep -q "error" "$work/err.txt"; then bad_one="N=$n: exit $rc without an error line"; break; fi
    if [ $n -lt 30 ] || [ "${FAULT_EVERY:-0}" = 1 ]; then n=$((n + 1)); else n=$((n + n / 8)); fi
  done
  if [ -n "$bad_one" ]; then fail=$((fail + 1)); echo "FAIL $name: $bad_one"; sed 's/^/     /' "$work/err.txt" | head -8
  else pass=$((pass + 1)); echo "ok   $name: $runs of its $total allocations failed in turn, $((runs - tolerated)) refused (exit 2 or 3, a diagnostic), $tolerated tolerated with the same outputs ($((SECONDS - start)) s)"; fi
}

o=$work/o
sweep "inspect" "$o" + "$MIGC" inspect "$S/tiny_cnn.onnx"
sweep "run" "$o" + "$MIGC" run "$S/tiny_cnn.onnx" --input input="$S/tiny_cnn_input.npy" --output-dir "$o"
sweep "coverage (json)" "$o" + "$MIGC" coverage "$S/tiny_cnn.onnx" --format json -o "$o/c.json"
sweep "weights --graph (binding, renaming, map)" "$o" - "$MIGC" weights "$S/tiny_cnn.pth" --graph "$S/tiny_cnn.onnx" \
  -o "$o/w.ckpt" --map-out "$o/map.json"
sweep "convert: cpu, mindspore, ascend" "$o" - "$MIGC" convert "$S/tiny_cnn.onnx" --weights "$S/tiny_cnn.pth" \
  --input-shape input=1x3x32x32 --target cpu,mindspore,ascend -o "$o/conv"
sweep "verify --reference (interpreter, layers) with --json and --junit" "$o" - "$MIGC" verify "$S/tiny_cnn.onnx" \
  --reference "$work/ref.npz" --json "$o/v.json" --junit "$o/v.xml"
sweep "ckpt dump --json" "$o" + "$MIGC" ckpt dump --json "$work/w.ckpt"
sweep "precision --budget --json (profile, emulated clones)" "$o" + "$MIGC" precision "$S/tiny_cnn.onnx" \
  --precision fp16 --samples 1 --budget 1e-3 --json "$o/p.json"
sweep "precision int8 (calibration, QDQ clones)" "$o" + "$MIGC" precision "$S/tiny_cnn.onnx" --precision int8 \
  --samples 1 --calib-samples 2 --keep-top 1

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && rm -rf "$work"
[ $fail -eq 0 ]
