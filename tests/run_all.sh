#!/bin/bash
# The whole test suite, as `make test` runs it: unit tests (ctest) in the normal and
# the ASan+UBSan build, then the end-to-end suites, then a 30-second fuzz smoke.
# usage: tests/run_all.sh BUILD_DIR ASAN_BUILD_DIR
# Ends with "N passed, N failed" counting suites; exits 1 if any suite failed.
set -u
BUILD=${1:-build}
ASAN=${2:-build-asan}
cd "$(dirname "$0")/.."
passed=0 failed=0 failed_names=()

# cpu_now sets CPU to the CPU seconds (user + system) of this shell's finished
# children so far: beside the wall time it says how much of the machine a suite
# used. (times must run in this shell, not a $(...) subshell, to see them.)
cpu_file=$(mktemp)
trap 'rm -f "$cpu_file"' EXIT
cpu_now() {
  times > "$cpu_file"
  CPU=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.0f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$cpu_file")
}

suite() { # name command...
  local name=$1; shift
  local start=$SECONDS cpu0 verdict
  cpu_now; cpu0=$CPU
  echo "=== $name"
  if "$@"; then
    passed=$((passed + 1)); verdict=ok
  else
    failed=$((failed + 1)); failed_names+=("$name"); verdict=FAILED
  fi
  cpu_now
  echo "--- $name: $verdict ($((SECONDS - start)) s, $((CPU - cpu0)) s CPU)"
}

# Two lanes, because most suites keep one core busy at most (Python, qemu, one
# migc at a time) and CI has two. The side lane holds the suites that share no
# fixture with the main lane (they read the committed samples and ../shared, and
# write only under mktemp): unit tests, the conformance runs, hostile inputs, the
# emulators' own suites, the fuzz smoke. convert_cli runs alone after both. The main lane holds the torchvision
# chain, whose exports later suites reuse, in its order. The side lane's report
# is printed after the main lane's. MIGC_TEST_LANES=1 runs everything in one.
side_lane() {
  suite "unit tests" bash -c "cd $BUILD && ctest --output-on-failure -j2"
  suite "unit tests (ASan+UBSan)" bash -c \
    "cd $ASAN && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j2"
  suite "inspect every conformance model" bash ../shared/acceptance/inspect-all.sh "$BUILD/migc"
  suite "inspect every conformance model (ASan+UBSan)" bash ../shared/acceptance/inspect-all.sh "$ASAN/migc"
  [ -f tests/e2e/bad_inputs.sh ] && suite "bad input exits 2" bash tests/e2e/bad_inputs.sh "$BUILD/migc"
  suite "hostile inputs: refused in 10 s, nothing read outside, nothing changed" bash tests/e2e/hostile_inputs.sh "$BUILD"
  suite "hostile inputs under ASan+UBSan" bash tests/e2e/hostile_inputs.sh "$ASAN"
  suite "allocation failures through every command: exit 2 or 3 with a diagnostic (ASan+UBSan)" bash tests/e2e/fault_cli.sh "$ASAN"
  suite "shape inference agrees with declared shapes" bash tests/e2e/shape_agreement.sh "$BUILD/migc"
  suite "conformance (interpreter), unexpected failures" bash tests/e2e/conformance.sh "$BUILD/migc"
  suite "conformance (interpreter), pass thresholds" bash ../shared/acceptance/conformance.sh "$BUILD/migc" interp
  suite "conformance node/ under ASan+UBSan" bash tests/e2e/conformance.sh "$ASAN/migc" node simple
  suite "runtime kernels on aarch64 (clang cross-build, qemu)" bash tests/e2e/runtime_aarch64.sh
  suite "conformance (C backend): node >= 750, no unexpected failure" bash tests/e2e/conformance_c.sh "$BUILD/migc"
  suite "Resize: every mode and odd scale against torch and the spec (interpreter and C)" bash tests/e2e/resize_diff.sh "$BUILD/migc"
  suite "CPU symbolic batch and sequence: resnet18 and mobilenet_v2 run batch 1, 3, 8, transformer_encoder seq 5, 9, 32 in one binary against torch, arena as static, errors past the maximum, ASan+UBSan" env CPU_DYNAMIC_MODELS="resnet18 mobilenet_v2" bash tests/e2e/cpu_dynamic.sh "$BUILD" "$ASAN"
  suite "CPU prepared weights (layout version checked at init, other panel heights) and --threads (bit-identical)" bash tests/e2e/cpu_prepared.sh "$BUILD"
  suite "convert every conformance model under ASan+UBSan" bash tests/e2e/convert_all.sh "$ASAN/migc"
  suite "Ascend: the committed aclnn declarations match the fact table and compile as C99" bash tests/e2e/ascend_facts.sh "$BUILD"
  suite "aclnn emulator: fact-table contract checks and plain-loop compute" bash tests/e2e/ascend_emu.sh
  suite "Ascend: the generated CMakeLists links against fake CANN trees (both layouts); C99 warning-free on gcc, clang, aarch64" bash tests/e2e/ascend_cmake.sh "$BUILD"
  suite "Ascend conformance (ascend-emu), every 4th node test (make test-zoo: all, >= 600): the share of passes, the rest listed" env ASCEND_CONF_SAMPLE=4 bash tests/e2e/ascend_conformance.sh "$BUILD/migc"
  suite "MindSpore stand-in: strict API table bindings, pitfalls against torch, .ckpt, grads, ops.Custom" bash tests/e2e/mindspore_standin.sh
  suite "MindSpore conformance (mindspore-emu): node >= 600 through the stand-in, every other test listed with its reason" bash tests/e2e/mindspore_conformance.sh "$BUILD/migc"
  suite "MindSpore harmful mutations fail the parity check (padding order, LayerNorm eps, BatchNorm momentum, dropped axis)" bash tests/e2e/mindspore_mutations.sh "$BUILD"
  suite "MindSpore package: config.json schema, ModelArts service 200/400, export.py, Lite/ATC command lines, hostile names" bash tests/e2e/mindspore_package.sh "$BUILD"
  suite "torch_reference.py: reference folders" bash tests/e2e/torch_reference.sh
  suite "precision profile and budget: fp16/bf16 emulation against torch's, the sensitive LayerNorm kept fp32 (ASan+UBSan)" bash tests/e2e/precision_profile.sh "$ASAN"
  suite "CPU int8: calibrate tiny_cnn on 10 inputs, int8 vs fp32 torch, quant.json (numpy minmax scale, --quant-params round trip), error paths" bash tests/e2e/int8.sh "$BUILD"
  [ -f tests/fuzz/run.sh ] && suite "fuzz smoke (30 s)" bash tests/fuzz/run.sh 30
}

side_log=$(mktemp)
trap 'rm -f "$cpu_file" "$side_log" "$side_log.cpu" "$side_log.pid"; [ -n "${side_pid:-}" ] && kill "$side_pid" 2> /dev/null' EXIT
if [ "${MIGC_TEST_LANES:-2}" = 1 ]; then
  side_lane
else
  # Its own file for cpu_now: the lanes' `times` must not write over each other.
  # Started twice removed, so this shell never reaps it: a reaped lane's CPU time
  # would count in the `times` of whichever suite was running when it ended.
  ( (cpu_file=$side_log.cpu; side_lane; IFS=';'; echo "SIDE-COUNTS $passed $failed ${failed_names[*]}") \
      > "$side_log" 2>&1 & echo $! > "$side_log.pid" )
  side_pid=$(cat "$side_log.pid")
fi

suite "torchvision exports: import and static shapes" bash tests/e2e/torchvision_inspect.sh "$BUILD/migc"
suite "torchvision: interpreter agrees with PyTorch" bash tests/e2e/torchvision_interp.sh "$BUILD"
suite "torchvision: generated C agrees with PyTorch (12 models x 2 exports)" bash tests/e2e/torchvision_c.sh "$BUILD"
suite "detection models: C and interpreter give torch's detections (opset 17; make test-zoo: 13 too)" env DET_OPSETS=17 bash tests/e2e/detection.sh "$BUILD"
suite "generated C on gcc, clang and aarch64 (qemu)" bash tests/e2e/generated_portability.sh "$BUILD"
suite "generated C on threads: resnet18, mobilenet_v2, vit_tiny at --threads 1-4 the same bytes and torch's; every split kernel under ThreadSanitizer (make test-zoo: resnet50, vit_b_16)" bash tests/e2e/cpu_threads.sh "$BUILD"
suite "autodiff against torch gradients" bash tests/e2e/autodiff_torch.sh "$BUILD" build/fixtures/tv build/autodiff-e2e
suite "migc verify: parity gate, mutations, JUnit" bash tests/e2e/verify.sh "$BUILD"
suite "weights: .pth/.safetensors to .ckpt, checked by check-ckpt.py; binding; bad input" bash tests/e2e/weights.sh "$BUILD"
suite "convert --weights: a fine-tuned .pth reaches the generated C (stale exports, both styles)" bash tests/e2e/weights_reach_c.sh "$BUILD"
suite "Ascend: the emulated aclnn program agrees with PyTorch (resnet18, squeezenet1_1 both styles, tiny_cnn; issue 7 small models both styles through verify; tiny_cnn and transformer_encoder in float16 and bfloat16; make test-zoo: the twelve), no leak or contract violation" bash tests/e2e/ascend_parity.sh "$BUILD"
suite "Ascend: a roi_align detection head through aclnnRoiAlign, and through the host fallback with a custom-op skeleton (--ascend-no-op)" bash tests/e2e/ascend_roi.sh "$BUILD"
suite "MindSpore net.py through the stand-in agrees with torch (tiny_cnn, resnet18, mobilenet_v2)" bash tests/e2e/mindspore_net.sh "$BUILD"
suite "MindSpore verify --backend mindspore-emu: forward and gradients through the stand-in, mutations fail" bash tests/e2e/mindspore_verify.sh "$BUILD"
suite "MindSpore AMP O0-O3 and --precision fp16 through the stand-in against fp32 torch (cosine, top-1, fp16 checkpoint; BatchNorm in fp16 fails)" bash tests/e2e/mindspore_amp.sh "$BUILD"
suite "CPU --precision fp16/bf16: 16-bit weights widened per layer against fp32 torch (cosine, top-1, half-size weights file, precision in the header), verify --precision" bash tests/e2e/cpu_precision.sh "$BUILD"
suite "MindSpore custom ops: nodes without a rule run as ops.Custom AOT CPU kernels through the stand-in" bash tests/e2e/mindspore_custom.sh "$BUILD"
suite "coverage says what convert does (zoo both styles, conformance; with and without --input-shape)" bash tests/e2e/coverage_agreement.sh "$BUILD"
suite "coverage: zoo and node reports, honesty, rules errors, HTML" bash tests/e2e/coverage.sh "$BUILD"
suite "migc batch + report: 4-model manifest, -j 2, resume after SIGKILL, 3 shards merged, timeout, Slurm stand-in, JUnit, HTML" bash tests/e2e/batch.sh "$BUILD"

if [ -n "${side_pid:-}" ]; then
  while kill -0 "$side_pid" 2> /dev/null; do sleep 2; done
  echo
  echo "=== the side lane, run beside the suites above"
  grep -v '^SIDE-COUNTS' "$side_log"
  if counts=$(grep '^SIDE-COUNTS' "$side_log"); then
    read -r _ side_passed side_failed side_names <<< "$counts"
    passed=$((passed + side_passed)) failed=$((failed + side_failed))
    [ -n "$side_names" ] && failed_names+=("$side_names")
  else
    echo "the side lane did not finish"; failed=$((failed + 1)); failed_names+=("the side lane")
  fi
fi

# After both lanes: convert_cli times a build on one core (issue 18: tiny_cnn's
# project in under 5 s of CPU time), which a busy second lane inflates.
suite "migc convert: project, runner, errors, --strict (alone: it times a build)" bash tests/e2e/convert_cli.sh "$BUILD"

echo
[ $failed -gt 0 ] && echo "failed suites: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
