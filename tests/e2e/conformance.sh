#!/bin/bash
# Runs `migc conformance` over every folder of ../shared/onnx-conformance with the
# xfail list; fails on any failure the list does not name. Prints each folder's
# summary line.
# usage: tests/e2e/conformance.sh MIGC [FOLDERS...]
set -u -o pipefail
MIGC=${1:-build/migc}; shift || true
folders=${*:-node pytorch-converted pytorch-operator simple light}
cd "$(dirname "$0")/../.."
rc=0
for d in $folders; do
  out=$("$MIGC" conformance --xfail tests/conformance_xfail.txt "../shared/onnx-conformance/$d") || rc=1
  echo "$out" | grep -E '^FAIL' | head -20
  printf '%-18s %s\n' "$d" "$(echo "$out" | tail -1)"
done
exit $rc
