#!/bin/bash
# `migc convert --cpu-only` on every conformance model (run with the ASan+UBSan
# build by make test): whatever a model holds, conversion ends with exit 0 (written,
# perhaps with unsupported nodes reported) or 2 (bad input), never a crash or a
# sanitizer report.
# usage: tests/e2e/convert_all.sh MIGC
set -u
MIGC=${1:-build/migc}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0 bad=0
for m in ../shared/onnx-conformance/*/*/model.onnx ../shared/onnx-conformance/light/*.onnx; do
  n=$((n + 1))
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$MIGC" convert "$m" -o "$work/out" --cpu-only > "$work/log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 2 ]; then
    bad=$((bad + 1)); echo "FAIL exit $rc: $m"; grep -m3 -E "ERROR|runtime error" "$work/log"
  fi
  rm -rf "$work/out"
done
echo "$((n - bad)) passed, $bad failed"
[ $bad -eq 0 ]
