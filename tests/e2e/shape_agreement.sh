#!/bin/bash
# Compares migc's inferred output shapes and dtypes with the shapes the conformance
# models declare, for every output whose declared shape is fully static.
# Every disagreement must be listed in tests/e2e/shape_xfail.txt with a reason, and
# every entry there must still disagree (a stale entry fails the suite, so the list
# stays honest). Prints the agreement rate.
# usage: tests/e2e/shape_agreement.sh MIGC [--write-xfail]
set -u
MIGC=${1:-build/migc}
here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../../../shared/onnx-conformance" && pwd)
xfail=$here/shape_xfail.txt
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
: > "$tmp/results"
# one INDEX MODEL: the model's result lines into $tmp/r.INDEX (the models are
# inspected side by side, one per core, and the lines gathered in order)
one() {
  local i=$1 m=$2 rel=${2#$data/} out=$tmp/r.$1
  if ! "$MIGC" inspect --json "$m" > "$tmp/out.$i.json" 2>/dev/null; then
    echo "INSPECT-FAILED $rel" > "$out"; rm -f "$tmp/out.$i.json"; return
  fi
  jq -r --arg rel "$rel" '.outputs[]
    | select(.declared_shape != null and (.declared_shape | all(type == "number")))
    | (if (.shape == .declared_shape and .dtype == .declared_dtype) then "OK" else "BAD" end)
      + " " + $rel + " " + .name + " inferred=" + (.shape|tojson) + .dtype
      + " declared=" + (.declared_shape|tojson) + .declared_dtype' "$tmp/out.$i.json" > "$out"
  rm -f "$tmp/out.$i.json"
}
export -f one
export MIGC data tmp
find "$data" -name '*.onnx' | sort | awk '{print NR "\t" $0}' > "$tmp/models"
xargs -P "$(nproc)" -L 1 -d '\n' bash -c 'IFS=$(printf "\t") read -r i m <<< "$0"; one "$i" "$m"' < "$tmp/models"
n_models=$(wc -l < "$tmp/models")
for i in $(seq "$n_models"); do
  [ -f "$tmp/r.$i" ] || { echo "NO-RESULT model $i" >> "$tmp/results"; continue; }
  cat "$tmp/r.$i" >> "$tmp/results"
done

total=$(grep -c -E '^(OK|BAD)' "$tmp/results")
ok=$(grep -c '^OK' "$tmp/results")
fail=0
grep -E '^(INSPECT-FAILED|NO-RESULT)' "$tmp/results" && fail=1
# A disagreement is keyed by "model output".
grep '^BAD' "$tmp/results" | awk '{print $2" "$3}' | sort > "$tmp/bad"
grep -v '^#' "$xfail" | grep -v '^\s*$' | awk '{print $1" "$2}' | sort > "$tmp/listed"
if grep -v '^#' "$xfail" | grep -v '^\s*$' | awk 'NF < 3 {exit 1}'; then :; else
  echo "every entry of $xfail needs a reason"; fail=1; fi
comm -23 "$tmp/bad" "$tmp/listed" | while read -r line; do
  echo "UNEXPECTED: $(grep -F "BAD ${line% *} ${line#* } " "$tmp/results" | head -1)"; done
comm -13 "$tmp/bad" "$tmp/listed" | sed 's/^/STALE xfail entry (now agrees): /'
[ -n "$(comm -3 "$tmp/bad" "$tmp/listed")" ] && fail=1
rate=$(awk -v a="$ok" -v b="$total" 'BEGIN { printf "%.1f", 100 * a / b }')
echo "shape agreement: $ok of $total statically declared outputs ($rate%); $((total - ok)) listed in shape_xfail.txt"
exit $fail
