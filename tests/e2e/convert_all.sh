#!/bin/bash
# `migc convert --cpu-only` on every conformance model (run with the ASan+UBSan
# build by make test): whatever a model holds, conversion ends with exit 0 (written,
# perhaps with unsupported nodes reported) or 2 (bad input), never a crash or a
# sanitizer report. The models convert side by side, one per core.
# usage: tests/e2e/convert_all.sh MIGC
set -u
MIGC=${1:-build/migc}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
one() { # INDEX MODEL: prints "FAIL ..." lines when the conversion crashed or a sanitizer spoke
  local out=$work/out$1 log=$work/log$1 rc
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$MIGC" convert "$2" -o "$out" --cpu-only > "$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 2 ]; then echo "FAIL exit $rc: $2"; grep -m3 -E "ERROR|runtime error" "$log"; fi
  rm -rf "$out" "$log"
}
export -f one
export MIGC work
models=(../shared/onnx-conformance/*/*/model.onnx ../shared/onnx-conformance/light/*.onnx)
printf '%s\n' "${models[@]}" | awk '{print NR "\t" $0}' |
  xargs -P "$(nproc)" -L 1 -d '\n' bash -c 'IFS=$(printf "\t") read -r i m <<< "$0"; one "$i" "$m"' > "$work/fails"
cat "$work/fails"
bad=$(grep -c '^FAIL' "$work/fails")
echo "$((${#models[@]} - bad)) passed, $bad failed"
[ "$bad" -eq 0 ] && [ ${#models[@]} -gt 1000 ]
