#!/bin/bash
# `migc batch` and `migc report` on a 4-model manifest (issue 14, the `make test`
# version of the zoo one): squeezenet1_1 and conv1d_gn_prelu with .pth and
# tools/torch_reference.py folders (conv1d for cpu, ascend and mindspore, with
# gradients), a deliberately broken ONNX (truncated) and a model with an op no
# target supports (com.example::MyOp).
# - a bad manifest exits 2 with one line naming the file and the problem;
# - -j 2 finishes: the two real models pass, the broken one fails with its reason,
#   MyOp is in every target's blocking list; exit 1; result.json holds the inputs'
#   SHA-256s (as sha256sum computes them); report.json validates against its
#   schema, junit.xml against the JUnit XSD (one testcase per model and target);
#   report.html renders in headless Chromium, one matrix row per model;
# - --resume redoes nothing (mtimes kept); a changed setting redoes that model only;
# - SIGKILL partway, then --resume: finished models are not redone, and the report
#   equals the uninterrupted one, timings aside; nothing is left running;
# - three shards: each model in exactly one (the shard SHA-256 says), merged by
#   `migc report` into the unsharded report.json, timings aside;
# - --timeout kills a model's whole process group and fails it with the reason;
# - the Slurm array example of docs/batch.md, through a stand-in sbatch.
# usage: tests/e2e/batch.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=$(cd "$BUILD" && pwd)
MIGC=$BUILD/migc
PY=/usr/bin/python3
fix=build/fixtures/batch
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
check() { # description command...
  local what=$1; shift
  if "$@" > "$work/check.log" 2>&1; then ok "$what"; else bad "$what: $(tail -3 "$work/check.log" | tr '\n' ' ')"; fi
}
# every generated project compiles the same runtime sources: ccache compiles them once
if command -v ccache >/dev/null; then export CC="ccache cc" CCACHE_DIR=${CCACHE_DIR:-$ROOT/build/ccache}; fi

# --- fixtures (cached): two reference folders, the broken and the unsupported model
mkdir -p "$fix"
ref() { # name factory shape
  [ -f "$fix/$1/ref.json" ] && return 0
  $PY tools/torch_reference.py "$2" --input-shape "$3" --perturb --no-stability -o "$fix/$1" > "$fix/$1.log" 2>&1
}
ref squeezenet1_1 torchvision.models:squeezenet1_1 1x3x224x224 &
ref conv1d tests.fixtures.parity_models:conv1d_gn_prelu 2x8x32 &
wait
[ -f "$fix/squeezenet1_1/ref.json" ] && [ -f "$fix/conv1d/ref.json" ] || { echo "FAIL torch_reference.py"; exit 1; }
[ -f "$fix/bad/custom_op.onnx" ] || $PY tests/fixtures/make_bad_models.py -o "$fix/bad" > /dev/null
head -c 3000 "$fix/squeezenet1_1/model.onnx" > "$work/broken.onnx" # cut in the middle of a tensor
cp "$fix/bad/custom_op.onnx" "$work/unsupported.onnx"
ln -s "$ROOT/$fix/squeezenet1_1" "$work/sq" && ln -s "$ROOT/$fix/conv1d" "$work/c1d"
cat > "$work/zoo.json" <<'EOF'
{"version": 1,
 "models": [
  {"name": "squeezenet1_1", "onnx": "sq/model.onnx", "weights": "sq/model.pth", "reference": "sq"},
  {"name": "conv1d", "onnx": "c1d/model_preserve.onnx", "weights": "c1d/model.pth", "reference": "c1d",
   "targets": ["cpu", "ascend", "mindspore"], "grad": true, "tolerance": {"rtol": 1e-3, "atol": 1e-5}},
  {"name": "broken", "onnx": "broken.onnx"},
  {"name": "unsupported", "onnx": "unsupported.onnx", "targets": ["cpu", "ascend", "mindspore"]}
 ]}
EOF
# the models and targets, as this manifest states them (what every check below expects)
MODELS="broken conv1d squeezenet1_1 unsupported"
N_CASES=8 # squeezenet 1 + conv1d 3 + broken 1 + unsupported 3
strip='del(.sources) | del(.. | .measurements?)'

# --- manifests: valid, and bad ones (exit 2, one line naming the file and the problem)
check "--check: valid manifest" bash -c "'$MIGC' batch --check '$work/zoo.json' | grep -q '4 models, valid'"
check "manifest validates against docs/batch-manifest.schema.json" $PY -c "
import json, jsonschema, sys
jsonschema.validate(json.load(open(sys.argv[1])), json.load(open('docs/batch-manifest.schema.json')))" "$work/zoo.json"
badm() { # description json expected-text [--check]
  printf '%s' "$2" > "$work/bad.json"
  "$MIGC" batch ${4:-} "$work/bad.json" -o "$work/never" > "$work/bad.out" 2> "$work/bad.err"
  local rc=$? lines
  lines=$(wc -l < "$work/bad.err")
  if [ $rc = 2 ] && [ "$lines" = 1 ] && grep -q "bad.json" "$work/bad.err" && grep -q -- "$3" "$work/bad.err" &&
     [ ! -e "$work/never" ]; then ok "bad manifest ($1): exit 2, one line: $(cat "$work/bad.err")"
  else bad "bad manifest ($1): rc $rc, $lines lines: $(head -3 "$work/bad.err")"; fi
  # the schema agrees (not on files, which it cannot see, nor on distinct names, which
  # JSON Schema cannot state)
  if [ -z "${4:-}" ] && [ "$1" != "duplicate name" ] && $PY -c "import json,jsonschema,sys; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open('docs/batch-manifest.schema.json')))" "$work/bad.json" 2>/dev/null; then
    bad "bad manifest ($1): the schema accepts it"
  fi
}
badm "not JSON" '{"models": [' "line"
badm "no models" '{"models": []}' '"models" must be a non-empty array'
badm "onnx missing" '{"models": [{"name": "a"}]}' "models\[0\] 'a': \"onnx\" is required"
badm "misspelt key" '{"models": [{"name": "a", "onnx": "a.onnx", "weigths": "a.pth"}]}' 'unknown key "weigths"'
badm "duplicate name" '{"models": [{"name": "a", "onnx": "a.onnx"}, {"name": "a", "onnx": "b.onnx"}]}' "name 'a' is also"
badm "bad name" '{"models": [{"name": "../x", "onnx": "a.onnx"}]}' '"name" must be'
badm "bad target" '{"models": [{"name": "a", "onnx": "a.onnx", "targets": ["gpu"]}]}' "targets\[0\]"
badm "bad shape" '{"models": [{"name": "a", "onnx": "a.onnx", "input_shape": {"x": "1xAx3"}}]}' 'input_shape "x"'
badm "bad tolerance" '{"models": [{"name": "a", "onnx": "a.onnx", "tolerance": {"rtol": -1}}]}' "tolerance.rtol"
badm "model not an object" '{"models": [1]}' "models\[0\] must be an object"
badm "a report file's name" '{"models": [{"name": "report.json", "onnx": "a.onnx"}]}' '"name" must be'
badm "name not a string" '{"models": [{"name": 5, "onnx": "a.onnx"}]}' '"name" must be'
badm "grad not a boolean" '{"models": [{"name": "a", "onnx": "a.onnx", "grad": "yes"}]}' '"grad" must be true or false'
badm "version 2" '{"version": 2, "models": [{"name": "a", "onnx": "a.onnx"}]}' '"version" must be 1'
badm "missing file (--check)" '{"models": [{"name": "a", "onnx": "nowhere.onnx"}]}' "nowhere.onnx" --check
for args in "--shard 3/3" "--shard x" "-j 0" "--targets gpu" "--timeout -1"; do
  "$MIGC" batch "$work/zoo.json" -o "$work/never" $args 2> "$work/usage.err"
  [ $? = 2 ] && [ ! -e "$work/never" ] && ok "usage error '$args': exit 2" || bad "usage error '$args' did not exit 2"
done
check "--help (batch, report)" bash -c "'$MIGC' batch --help | grep -q -- --shard && '$MIGC' report --help | grep -q junit.xml"

# --- the whole batch, -j 2
start=$SECONDS
"$MIGC" batch "$work/zoo.json" -o "$work/full" -j 2 --junit "$work/extra-junit.xml" > "$work/full.out" 2> "$work/full.err"
rc=$?
full_s=$((SECONDS - start))
[ $rc = 1 ] && ok "batch -j 2 finished in $full_s s, exit 1 (some models fail)" || bad "batch exit $rc: $(tail -3 "$work/full.err")"
st() { jq -r "$2" "$work/$1/report.json"; }
for m in squeezenet1_1 conv1d; do
  [ "$(st full ".models[] | select(.name == \"$m\") | .status")" = pass ] && ok "$m passes" ||
    bad "$m: $(st full ".models[] | select(.name == \"$m\") | .reason")"
done
[ "$(st full '.models[] | select(.name == "conv1d") | [.targets[] | .parity] | join(",")')" = "pass,pass,pass" ] &&
  ok "conv1d: parity pass on cpu, ascend and mindspore" || bad "conv1d parity: $(st full '.models[] | select(.name == "conv1d") | .targets')"
reason=$(st full '.models[] | select(.name == "broken") | .reason')
[ "$(st full '.models[] | select(.name == "broken") | .status')" = fail ] && echo "$reason" | grep -q "malformed" &&
  ok "broken model failed with its reason: $reason" || bad "broken model: $reason"
for t in cpu ascend mindspore; do
  st full ".blocking_ops.$t[] | select(.op == \"com.example::MyOp\") | .models[]" | grep -qx unsupported &&
    ok "com.example::MyOp blocks 'unsupported' on $t" || bad "MyOp not in the $t blocking list"
done
[ "$(st full '.summary | "\(.models) \(.passed) \(.failed)"')" = "4 2 2" ] && ok "summary: 4 models, 2 passed, 2 failed" ||
  bad "summary $(st full .summary)"
[ "$(jq -r '.inputs.onnx.sha256' "$work/full/squeezenet1_1/result.json")" = "$(sha256sum < "$fix/squeezenet1_1/model.onnx" | cut -d' ' -f1)" ] &&
  [ "$(jq -r '.inputs.weights.sha256' "$work/full/squeezenet1_1/result.json")" = "$(sha256sum < "$fix/squeezenet1_1/model.pth" | cut -d' ' -f1)" ] &&
  [ "$(jq -r '.inputs.reference.sha256' "$work/full/squeezenet1_1/result.json")" = "$(sha256sum < "$fix/squeezenet1_1/ref.npz" | cut -d' ' -f1)" ] &&
  ok "result.json holds the inputs' SHA-256 (as sha256sum computes them)" || bad "input hashes differ from sha256sum"
check "report.json validates against docs/batch-report.schema.json" $PY -c "
import json, jsonschema, sys
jsonschema.validate(json.load(open(sys.argv[1])), json.load(open('docs/batch-report.schema.json')))" "$work/full/report.json"
check "junit.xml validates against the JUnit XSD" xmllint --noout --schema tests/fixtures/junit-10.xsd "$work/full/junit.xml"
check "--junit F writes the same JUnit report to F" cmp "$work/full/junit.xml" "$work/extra-junit.xml"
grep -q '^batch: start squeezenet1_1' "$work/full.err" && grep -q '^batch: \[4/4\]' "$work/full.err" &&
  ok "without a terminal: plain log lines" || bad "log lines: $(head -3 "$work/full.err")"
[ "$(grep -c '<testcase ' "$work/full/junit.xml")" = $N_CASES ] && [ "$(grep -c '<failure ' "$work/full/junit.xml")" = 4 ] &&
  ok "junit.xml: one testcase per model and target ($N_CASES), 4 failures (broken 1, unsupported 3)" ||
  bad "junit.xml: $(grep -c '<testcase ' "$work/full/junit.xml") cases, $(grep -c '<failure ' "$work/full/junit.xml") failures"
grep -q '| broken | \*\*FAIL\*\* |' "$work/full/report.md" && grep -q 'com.example::MyOp' "$work/full/report.md" &&
  ok "report.md: the failing model and the blocking op" || bad "report.md"
[ "$(ls "$work/full/conv1d/logs")" ] && ok "step logs kept: $(ls "$work/full/conv1d/logs" | tr '\n' ' ')" || bad "no logs"

# report.html in headless Chromium: a screenshot, one matrix row per model, sorting
html=$work/full/report.html
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$work/chrome" --proxy-server=127.0.0.1:9
       --window-size=1280,900)
timeout 60 chromium "${flags[@]}" --screenshot="$work/report.png" "file://$html" > /dev/null 2>&1
size=$(stat -c %s "$work/report.png" 2>/dev/null || echo 0)
[ "$size" -gt 10000 ] && ok "report.html screenshot ($size bytes)" || bad "report.html screenshot: $size bytes"
timeout 60 chromium "${flags[@]}" --dump-dom "file://$html" 2> /dev/null > "$work/dom.html"
rows=$(grep -o '<tr data-model="[^"]*"' "$work/dom.html" | sed 's/.*="\(.*\)"/\1/' | tr '\n' ' ')
[ "$rows" = "$MODELS " ] && ok "matrix: one row per model ($rows)" || bad "matrix rows: '$rows', want '$MODELS '"
grep -q 'id="rate-plot"' "$work/dom.html" && grep -q 'class="bar-models"' "$work/dom.html" && ok "rate plot rendered" || bad "no plot"
# clicking the model header twice sorts the matrix descending: the last name first
sed 's#</body></html>#<script>var th=document.querySelector("table\#matrix th");th.click();th.click();\
document.body.setAttribute("data-first",document.querySelector("table\#matrix tbody tr").dataset.model);</script></body></html>#' \
  "$html" > "$work/sorted.html"
first=$(timeout 60 chromium "${flags[@]}" --dump-dom "file://$work/sorted.html" 2> /dev/null | grep -o 'data-first="[^"]*"')
[ "$first" = 'data-first="unsupported"' ] && ok "matrix sorts by model (descending: unsupported first)" || bad "sorting: $first"

# --- resume: nothing redone; a changed setting redoes that model only
stat -c '%n %Y' "$work"/full/*/result.json > "$work/mtimes.before"
sleep 1.1
start=$SECONDS
"$MIGC" batch "$work/zoo.json" -o "$work/full" -j 2 --resume > /dev/null 2> "$work/resume.err"
stat -c '%n %Y' "$work"/full/*/result.json > "$work/mtimes.after"
cmp -s "$work/mtimes.before" "$work/mtimes.after" && [ "$(grep -c 'resumed: result.json is current' "$work/resume.err")" = 4 ] &&
  ok "--resume with nothing changed: 4 skipped, no result.json rewritten ($((SECONDS - start)) s)" || bad "--resume redid work: $(diff "$work/mtimes.before" "$work/mtimes.after")"

# --- SIGKILL partway, then --resume
"$MIGC" batch "$work/zoo.json" -o "$work/killed" -j 1 > /dev/null 2> "$work/killed.err" &
bpid=$!
for _ in $(seq 600); do
  [ "$(ls "$work"/killed/*/result.json 2> /dev/null | wc -l)" -ge 1 ] && grep -q 'batch: start' <(tail -1 "$work/killed.err") && break
  sleep 0.1
done
kill -9 $bpid
wait $bpid 2> /dev/null
done_before=$(ls "$work"/killed/*/result.json 2> /dev/null | wc -l)
stat -c '%n %Y' "$work"/killed/*/result.json > "$work/killed.before" 2> /dev/null
sleep 2
left=$(pgrep -f -- "$work/killed/" | wc -l)
[ "$left" = 0 ] && ok "after SIGKILL nothing of the batch is left running" || bad "$left processes of the killed batch still run"
[ "$done_before" -ge 1 ] && [ "$done_before" -lt 4 ] && ok "killed partway: $done_before of 4 finished" || bad "killed with $done_before finished"
"$MIGC" report "$work/killed" -o "$work/killed-report" > /dev/null 2>&1
rc=$?
missing=$(jq -r '[.models[] | select(.reason // "" | startswith("missing")) | .name] | length' "$work/killed-report/report.json" 2> /dev/null)
[ $rc = 1 ] && [ "$missing" = $((4 - done_before)) ] && ok "report of the killed folder: the $missing unfinished models are failed, missing" ||
  bad "report of the killed folder: rc $rc, $missing missing"
sleep 1.1
"$MIGC" batch "$work/zoo.json" -o "$work/killed" -j 1 --resume > /dev/null 2> "$work/resumed.err"
kept=1
while read -r f t; do [ "$(stat -c %Y "$f")" = "$t" ] || kept=0; done < "$work/killed.before"
[ $kept = 1 ] && [ "$(grep -c 'batch: start' "$work/resumed.err")" = $((4 - done_before)) ] &&
  ok "--resume redid only the $((4 - done_before)) unfinished models; finished result.json mtimes unchanged" ||
  bad "--resume after SIGKILL: $(grep 'batch: start' "$work/resumed.err" | tr '\n' ' ')"
if diff <(jq -S "$strip" "$work/full/report.json") <(jq -S "$strip" "$work/killed/report.json") > "$work/kdiff"; then
  ok "killed + resumed report.json equals the uninterrupted one, timings aside"
else bad "killed + resumed report differs: $(head -5 "$work/kdiff")"; fi

# --- three shards, merged
for i in 0 1 2; do "$MIGC" batch "$work/zoo.json" -o "$work/shard-$i" --shard $i/3 -j 2 > /dev/null 2>&1; done
want=$($PY -c "
import hashlib, sys
for i in range(3):
    print(i, ' '.join(sorted(n for n in sys.argv[1:] if int(hashlib.sha256(n.encode()).hexdigest()[:16], 16) % 3 == i)))" $MODELS)
got=$(for i in 0 1 2; do echo "$i $(ls "$work/shard-$i"/*/result.json 2> /dev/null | xargs -r -n1 dirname | xargs -r -n1 basename | sort | tr '\n' ' ' | sed 's/ $//')"; done)
[ "$got" = "$want" ] && ok "shards: every model in exactly one, as SHA-256(name) mod 3 says ($(echo $got))" || bad "shards: got '$got', want '$want'"
"$MIGC" report "$work"/shard-0 "$work"/shard-1 "$work"/shard-2 -o "$work/merged" > /dev/null 2> "$work/merge.err"
rc=$?
[ $rc = 1 ] && ok "migc report over the shards: exit 1 (some models fail)" || bad "migc report exit $rc: $(cat "$work/merge.err")"
if diff <(jq -S "$strip" "$work/full/report.json") <(jq -S "$strip" "$work/merged/report.json") > "$work/sdiff"; then
  ok "merged shards' report.json equals the unsharded one, timings aside"
else bad "merged report differs: $(head -5 "$work/sdiff")"; fi
"$MIGC" report "$work/shard-0" "$work/shard-0" -o "$work/dup" > /dev/null 2> "$work/dup.err"
[ $? = 2 ] && grep -q "two of the folders" "$work/dup.err" && ok "the same model in two folders: exit 2" || bad "overlapping folders not refused"
"$MIGC" report "$work/nowhere" > /dev/null 2>&1
[ $? = 2 ] && ok "report of a missing folder: exit 2" || bad "report of a missing folder"

# --- --timeout: the model's whole process group is killed, the model fails with the reason
cat > "$work/slow.json" <<'EOF'
{"models": [{"name": "squeezenet1_1", "onnx": "sq/model.onnx", "weights": "sq/model.pth", "reference": "sq", "timeout": 0.5}]}
EOF
# the compiler hangs (a sleep with a mark to look for)
CC="sleep 31.4159; cc" "$MIGC" batch "$work/slow.json" -o "$work/slow" > /dev/null 2>&1
r=$(jq -r '.models[0].reason' "$work/slow/report.json" 2> /dev/null)
sleep 0.5
echo "$r" | grep -q "timeout" && [ "$(pgrep -f -- "sleep 31.4159" | wc -l)" = 0 ] &&
  ok "--timeout: killed with its steps, failed: $r" || bad "timeout: '$r', $(pgrep -f -- "sleep 31.4159" | wc -l) left running"

# --- the Slurm array of docs/batch.md, through a stand-in sbatch that runs it here
# on the quick half of the manifest (the models that fail at once): the array's plumbing is the point
cat > "$work/quick.json" <<'EOF'
{"models": [{"name": "broken", "onnx": "broken.onnx"}, {"name": "unsupported", "onnx": "unsupported.onnx"}]}
EOF
"$MIGC" batch "$work/quick.json" -o "$work/quick" > /dev/null 2>&1
mkdir -p "$work/slurm/bin"
ln -s "$ROOT/tests/fixtures/sbatch_standin.sh" "$work/slurm/bin/sbatch"
# the first two bash blocks under "### Slurm array": the array script, then its submission
awk -v out="$work/slurm" '/^### Slurm array/ {s = 1} s && /^```bash/ {n++; f = 1; next} f && /^```/ {f = 0; if (n == 2) exit; next}
     f {print > (out (n == 1 ? "/zoo-array.sh" : "/submit.sh"))}' docs/batch.md
if [ -s "$work/slurm/zoo-array.sh" ] && [ -s "$work/slurm/submit.sh" ]; then
  (cd "$work/slurm" && PATH="$work/slurm/bin:$PATH" MIGC="$MIGC" MANIFEST="$work/quick.json" RESULTS="$work/slurm/results" \
     SBATCH_LOG="$work/slurm/sbatch.log" bash submit.sh) > /dev/null 2>&1
  n=$(ls -d "$work"/slurm/results/shard-* 2> /dev/null | wc -l)
  array=$(sed -n 's/^#SBATCH --array=0-\([0-9]*\)/\1/p' "$work/slurm/zoo-array.sh")
  [ "$n" = $((array + 1)) ] && ok "Slurm: the array ran $n shards" || bad "Slurm: $n shard folders"
  if [ -f "$work/slurm/results/report/report.json" ] &&
     diff <(jq -S "$strip" "$work/quick/report.json") <(jq -S "$strip" "$work/slurm/results/report/report.json") > /dev/null; then
    ok "Slurm: the dependent report job's report.json equals the unsharded one, timings aside"
  else bad "Slurm: report missing or different: $(tail -3 "$work/slurm/sbatch.log")"; fi
else bad "Slurm: no script blocks found in docs/batch.md"; fi

# --- --resume after a changed setting (last: it changes the folder the others compare with)
sed 's#"reference": "sq"}#"reference": "sq", "tolerance": {"rtol": 2e-3}}#' "$work/zoo.json" > "$work/zoo2.json"
"$MIGC" batch "$work/zoo2.json" -o "$work/full" -j 2 --resume > /dev/null 2> "$work/resume2.err"
grep -q 'batch: start squeezenet1_1' "$work/resume2.err" && [ "$(grep -c 'batch: start' "$work/resume2.err")" = 1 ] &&
  [ "$(jq -r .inputs.settings.rtol "$work/full/squeezenet1_1/result.json")" = 0.002 ] &&
  ok "--resume after a tolerance change redoes that model only" || bad "--resume after a change: $(grep 'batch: start' "$work/resume2.err" | tr '\n' ' ')"

# --- a step that crashes (a make that dies of SIGSEGV) fails the model with the reason
mkdir -p "$work/crashbin"
printf '#!/bin/sh\nkill -SEGV $$\n' > "$work/crashbin/make"
chmod +x "$work/crashbin/make"
cat > "$work/crash.json" <<'EOF'
{"models": [{"name": "conv1d", "onnx": "c1d/model_preserve.onnx", "weights": "c1d/model.pth", "reference": "c1d"},
            {"name": "broken", "onnx": "broken.onnx"}]}
EOF
PATH="$work/crashbin:$PATH" "$MIGC" batch "$work/crash.json" -o "$work/crash" > /dev/null 2>&1
r=$(jq -r '.models[] | select(.name == "conv1d") | .reason' "$work/crash/report.json" 2> /dev/null)
[ "$r" = "cpu: build: crashed (signal 11, Segmentation fault)" ] && [ "$(jq -r .summary.models "$work/crash/report.json")" = 2 ] &&
  ok "a crashing build fails its model ($r) and the batch goes on" || bad "crash: '$r'"

# --- on a terminal: the live line (done/total, failures, running models, ETA)
script -qec "'$MIGC' batch '$work/quick.json' -o '$work/tty' --targets cpu,ascend" /dev/null > "$work/tty.out" 2>&1
grep -q $'\r\033\[K\[2/2\] 2 failed' "$work/tty.out" && grep -q 'ETA' "$work/tty.out" &&
  ok "on a terminal: the live line [done/total] failures | models | ETA" || bad "tty: $(tr '\r' '\n' < "$work/tty.out" | head -5)"
# broken names no targets: --targets gives it two; unsupported names none either
[ "$(grep -c '<testcase ' "$work/tty/junit.xml")" = 4 ] && ok "--targets cpu,ascend for the models that name none (4 testcases)" ||
  bad "--targets: $(grep -c '<testcase ' "$work/tty/junit.xml") testcases"

# --- a folder instead of a manifest
mkdir -p "$work/dir/sub"
cp "$fix/conv1d/model_preserve.onnx" "$work/dir/sub/c1d.onnx"
cp "$fix/conv1d/model.pth" "$work/dir/sub/c1d.pth"
"$MIGC" batch "$work/dir" -o "$work/dirout" > /dev/null 2>&1
[ "$(jq -r '.models[0].name + " " + .models[0].status + " " + (.models[0].inputs.weights.path | split("/") | last)' "$work/dirout/report.json" 2> /dev/null)" = "sub-c1d pass c1d.pth" ] &&
  ok "batch DIR: sub/c1d.onnx with its .pth beside it, named sub-c1d, passes" || bad "batch DIR: $(jq -c '.models' "$work/dirout/report.json" 2>&1 | head -c 300)"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
