#!/usr/bin/env bash
# tests/fuzz/run.sh SECONDS [TARGET|all]: build and run a libFuzzer target
# (default onnx_import; `all` runs every one for SECONDS: make fuzz).
#
#   1. configures build-fuzz (clang, -DMIGC_FUZZ=ON) and builds fuzz_TARGET;
#   2. seeds build-fuzz/corpus once from up to ~300 small (< 64 KB) conformance
#      models and tests/fuzz/corpus/onnx_import, and writes a dictionary of ONNX
#      op, attribute and field names (the other targets: corpus-TARGET, from
#      tests/fuzz/corpus/TARGET);
#   3. fuzzes for SECONDS on every core (libFuzzer fork mode, which gives one
#      merged summary), with the log in build-fuzz/runs/DATE-TIME/fuzz.log;
#   4. prints the final stats, and exits 1 if the run left any crash, leak,
#      timeout or out-of-memory artifact (each is shown with its report, obtained
#      by running the fuzzer on it again).
#
# Environment: CONFORMANCE (default ../shared/onnx-conformance next to the repo),
# FUZZ_JOBS (default nproc), MIGC_FUZZ_FAULTS=1 (also inject allocation failures;
# see fuzz_onnx_import.c). Exit status: 0 clean, 1 findings, 2 usage/build error.
set -u
set -o pipefail

TARGETS="onnx_import ckpt unpickle safetensors npy rules_xml"
usage() { echo "usage: $0 SECONDS [TARGET|all]   (targets: $TARGETS; default onnx_import)" >&2; exit 2; }
[ $# -eq 1 ] || [ $# -eq 2 ] || usage
SECONDS_TO_RUN=$1
TARGET=${2:-onnx_import}
case $SECONDS_TO_RUN in '' | *[!0-9]*) usage ;; esac
if [ "$TARGET" = all ]; then # every target in turn, SECONDS each
  rc=0
  for t in $TARGETS; do echo "=== fuzz_$t"; "$0" "$SECONDS_TO_RUN" "$t" || rc=1; done
  exit $rc
fi
case " $TARGETS " in *" $TARGET "*) ;; *) usage ;; esac

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build-fuzz
FUZZER=$BUILD/tests/fuzz/fuzz_$TARGET
CORPUS=$BUILD/corpus
[ "$TARGET" = onnx_import ] || CORPUS=$BUILD/corpus-$TARGET
# Deep nesting (200 message levels) and the rules files want room; the others'
# formats show their structure in a few KB.
MAX_LEN=65536
case $TARGET in onnx_import | rules_xml) MAX_LEN=262144 ;; esac
DICT=$BUILD/onnx.dict
CONFORMANCE=${CONFORMANCE:-$ROOT/../shared/onnx-conformance}
JOBS=${FUZZ_JOBS:-$(nproc)}
MAX_SEEDS=300
MAX_SEED_BYTES=65536

# One run at a time per build tree: a second run would rebuild the fuzzer under the
# first one's feet. The lock is held (fd 9) until this script exits.
mkdir -p "$BUILD"
exec 9>"$BUILD/.run.lock"
if ! flock -n 9; then
  echo "== another tests/fuzz/run.sh is using $BUILD; waiting for it"
  flock 9
fi

# --- 1. build ------------------------------------------------------------------
echo "== configuring $BUILD (clang, MIGC_FUZZ=ON)"
if ! CC=clang cmake -S "$ROOT" -B "$BUILD" -DMIGC_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >"$BUILD/configure.log" 2>&1; then
  tail -40 "$BUILD/configure.log" >&2
  echo "run.sh: cmake configure failed" >&2
  exit 2
fi
echo "== building fuzz_$TARGET"
if ! cmake --build "$BUILD" --target "fuzz_$TARGET" -j "$JOBS" >"$BUILD/build.log" 2>&1; then
  tail -40 "$BUILD/build.log" >&2
  echo "run.sh: build failed (full log: $BUILD/build.log)" >&2
  exit 2
fi

# --- 2. seed corpus (once) and dictionary ----------------------------------------
# The seeds: every small model outside node/ (light, simple, pytorch-*; about 150,
# the most varied), the node/ tests with subgraphs or functions (If, Loop, Scan,
# sequence ops), then node/ tests spread evenly over the alphabet up to MAX_SEEDS.
# Sorted listings keep the choice deterministic.
# The other targets start from the seeds kept in the repository
# (tests/fuzz/corpus/TARGET; for rules_xml also the built-in rules/).
if [ "$TARGET" != onnx_import ] && { [ ! -d "$CORPUS" ] || [ -z "$(ls -A "$CORPUS" 2>/dev/null)" ]; }; then
  mkdir -p "$CORPUS"
  cp "$ROOT/tests/fuzz/corpus/$TARGET"/* "$CORPUS"/ 2>/dev/null
  [ "$TARGET" = rules_xml ] && cp "$ROOT"/rules/*.xml "$CORPUS"/
  echo "== seeded $CORPUS with $(find "$CORPUS" -type f | wc -l) inputs"
elif [ "$TARGET" != onnx_import ]; then
  echo "== corpus $CORPUS: $(find "$CORPUS" -type f | wc -l) inputs (kept from earlier runs)"
elif [ ! -d "$CORPUS" ] || [ -z "$(ls -A "$CORPUS" 2>/dev/null)" ]; then
  if [ ! -d "$CONFORMANCE" ]; then
    echo "run.sh: no conformance models at $CONFORMANCE (set CONFORMANCE=DIR)" >&2
    exit 2
  fi
  mkdir -p "$CORPUS"
  small() { find "$@" -name '*.onnx' -size -"${MAX_SEED_BYTES}"c 2>/dev/null | LC_ALL=C sort; }
  {
    small "$CONFORMANCE/light" "$CONFORMANCE/simple" "$CONFORMANCE/pytorch-converted" \
      "$CONFORMANCE/pytorch-operator"
    small "$CONFORMANCE/node" | grep -E '/test_(if|loop|scan|sequence_map|range_.*expanded|affine_grid.*expanded)[^/]*/model\.onnx$'
    all_node=$(small "$CONFORMANCE/node" | grep -v expanded)
    n=$(printf '%s\n' "$all_node" | wc -l)
    step=$(( n / 160 > 1 ? n / 160 : 1 ))
    printf '%s\n' "$all_node" | awk -v s="$step" 'NR % s == 1 || s == 1'
  } | awk '!seen[$0]++' | head -n "$MAX_SEEDS" | while IFS= read -r f; do
    # flat, readable names: node/test_loop11/model.onnx -> node__test_loop11__model.onnx
    rel=${f#"$CONFORMANCE"/}
    cp "$f" "$CORPUS/${rel//\//__}"
  done
  cp "$ROOT/tests/fuzz/corpus/onnx_import"/* "$CORPUS"/ 2>/dev/null
  echo "== seeded $CORPUS with $(find "$CORPUS" -type f | wc -l) models"
else
  echo "== corpus $CORPUS: $(find "$CORPUS" -type f | wc -l) inputs (kept from earlier runs)"
fi

# The dictionary: op names from core/ops.def, plus names the importer matches on
# (domains, external-data keys, attribute names) and protobuf field tags of the
# messages it reads. Regenerated each run so it follows ops.def.
{
  echo '# generated by tests/fuzz/run.sh'
  sed -n 's/^OP(\([A-Za-z0-9_]*\),.*/"\1"/p' "$ROOT/core/ops.def"
  for w in ai.onnx ai.onnx.ml ai.onnx.preview.training com.microsoft com.example \
    location offset length checksum external_data then_branch else_branch body \
    axis axes keepdims perm shape value value_float value_ints value_string \
    Constant Loop If Scan Identity Dropout SequenceMap pytorch onnx-example; do
    echo "\"$w\""
  done
  # ModelProto: ir_version(1) opset_import(8) graph(7) functions(25);
  # GraphProto: node(1) initializer(5) input(11) output(12) value_info(13);
  # NodeProto: input(1) output(2) name(3) op_type(4) attribute(5) domain(7);
  # TensorProto: dims(1) data_type(2) float_data(4) int64_data(7) raw_data(9)
  # data_location(14); AttributeProto: t(5) g(6) type(20).
  for t in '\x08' '\x42' '\x3a' '\xca\x01' '\x0a' '\x2a' '\x5a' '\x62' '\x6a' \
    '\x12' '\x1a' '\x22' '\x32' '\x3a' '\x10' '\x22' '\x38' '\x4a' '\x70\x01' '\xa0\x01'; do
    echo "\"$t\""
  done
} | awk '!seen[$0]++' >"$DICT"

# --- 3. fuzz ---------------------------------------------------------------------
# Each run keeps its log and artifacts in build-fuzz/runs/DATE-TIME/.
RUN_DIR=$BUILD/runs/$(date +%Y%m%d-%H%M%S)
ARTIFACTS=$RUN_DIR/artifacts
LOG=$RUN_DIR/fuzz.log
mkdir -p "$ARTIFACTS"
echo "== fuzzing for ${SECONDS_TO_RUN}s on $JOBS workers${MIGC_FUZZ_FAULTS:+ (fault injection on)}; log: $LOG"
# halt_on_error etc.: a sanitizer report must end the input as a crash.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
FLAGS=(-max_len="$MAX_LEN" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$ARTIFACTS/" -print_final_stats=1)
[ "$TARGET" = onnx_import ] && FLAGS+=(-dict="$DICT")
(cd "$BUILD" && "$FUZZER" "${FLAGS[@]}" -max_total_time="$SECONDS_TO_RUN" \
  -fork="$JOBS" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 "$CORPUS") >"$LOG" 2>&1
status=$?

# --- 4. summary ------------------------------------------------------------------
# Fork mode prints "#EXECS: cov: C ft: F corp: N exec/s E oom/timeout/crash: a/b/c
# time: Ts job: J ..." after each job; the last such line is the run's total.
last=$(grep -a -E '^#[0-9]+: cov:' "$LOG" | tail -n 1)
echo "== fuzzer exit status: $status"
if [ -n "$last" ]; then
  echo "== final stats: $last"
  echo "$last" | awk '{
    execs = substr($1, 2) + 0
    for (i = 2; i <= NF; i++) {
      if ($i == "cov:") cov = $(i + 1)
      if ($i == "ft:") ft = $(i + 1)
      if ($i == "corp:") corp = $(i + 1)
      if ($i == "exec/s") eps = $(i + 1)
      if ($i == "time:") t = $(i + 1)
    }
    # the exec/s of fork mode is that of the last job; the run average is execs/time
    secs = t + 0
    printf "   total execs %d, exec/s %d (run average; last job %s), coverage %s edges (%s features), corpus %s, time %s\n",
           execs, (secs > 0 ? execs / secs : 0), eps, cov, ft, corp, t
  }'
else
  echo "== no stats line in $LOG; its end:"
  tail -n 20 "$LOG"
fi

# Any file the fuzzer wrote under the artifact prefix is a finding: crash-*,
# leak-*, timeout-*, oom-*. Fork mode keeps fuzzing after a finding
# (-ignore_crashes=1), so one bug usually leaves many artifacts: each is run again
# to get its report, and reports are grouped by a signature (the sanitizer's kind
# plus the first frame in migc's own code), showing the first report of each group.
artifacts=()
for a in "$ARTIFACTS"/*; do [ -f "$a" ] && artifacts+=("$a"); done
if [ "${#artifacts[@]}" -gt 0 ]; then
  declare -A group_count group_first
  order=()
  n_repro=0
  for a in "${artifacts[@]}"; do
    base=${a##*/}
    kind=${base%%-*}
    if [ "$n_repro" -ge 100 ]; then sig="$kind (not reproduced: over 100 artifacts)"; else
      n_repro=$((n_repro + 1))
      report=$(timeout 120 "$FUZZER" -timeout=10 -rss_limit_mb=2048 "$a" 2>&1)
      printf '%s\n' "$report" >"$a.report"
      what=$(printf '%s\n' "$report" | grep -a -m1 -oE "^fuzz_$TARGET: .*|"'runtime error: .*|ERROR: AddressSanitizer: [a-z-]+|ERROR: LeakSanitizer: [a-z ]+|ERROR: libFuzzer: [a-z -]+' |
        sed -E 's/-?[0-9][0-9a-fx.e+-]*/N/g' | cut -c1-90)
      where=$(printf '%s\n' "$report" | grep -a -E '^ +#[0-9]+ ' |
        grep -a -E '/(core|frontend|verify|cli)/' | grep -a -v '/core/arena\.c' |
        head -n 1 | sed -E 's/^ +#[0-9]+ 0x[0-9a-f]+ //')
      sig="$kind: ${what:-no report} @ ${where:-?}"
    fi
    if [ -z "${group_count[$sig]+x}" ]; then
      order+=("$sig")
      group_count[$sig]=0
      group_first[$sig]=$a
    fi
    group_count[$sig]=$((group_count[$sig] + 1))
  done
  echo
  echo "== FINDINGS: ${#artifacts[@]} artifact(s) in $ARTIFACTS, ${#order[@]} distinct"
  for sig in "${order[@]}"; do
    a=${group_first[$sig]}
    echo
    echo "== [$((group_count[$sig])) artifact(s)] $sig"
    echo "   first: $a ($(stat -c %s "$a") bytes)"
    echo "   reproduce: $FUZZER $a   (or: build/migc inspect $a)"
    if [ -f "$a.report" ]; then
      # After a sanitizer's own report, libFuzzer's "deadly signal" trace repeats it.
      awk '/runtime error|ERROR: (Address|Leak)Sanitizer/ { seen = 1 }
           /ERROR: libFuzzer: deadly signal/ && seen { exit } { print }' "$a.report" |
        grep -a -v -E '^(INFO|Executed|MS:|\*\*\*)|^$|: Running 1 inputs|^ +#[0-9]+ .*(fuzzer::|__sanitizer|__ubsan|__asan|__lsan|__interceptor|libc_start|_start |pthread_kill|raise\.c|abort\.c|\+0x[0-9a-f]+\) \(BuildId)' |
        head -n 30 | sed 's/^/   | /'
    fi
  done
  echo
  echo "run.sh: FAILED: ${#artifacts[@]} artifact(s), ${#order[@]} distinct finding(s); reports next to them as *.report"
  exit 1
fi
rmdir "$ARTIFACTS" 2>/dev/null # the log stays
# No artifact: a nonzero fuzzer status without one is still a failure (a crash of
# the fork-mode driver itself, or a build of the target that cannot start).
if [ "$status" -ne 0 ]; then
  echo "run.sh: the fuzzer exited with status $status but left no artifact; see $LOG"
  tail -n 30 "$LOG"
  exit 1
fi
echo "== clean: no crash, leak, timeout or OOM in ${SECONDS_TO_RUN}s"
exit 0
