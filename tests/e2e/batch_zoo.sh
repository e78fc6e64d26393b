#!/bin/bash
# `make test-zoo`: issue 14's acceptance manifest. Issue 6's twelve torchvision
# models, each with its .pth and a tools/torch_reference.py folder (random,
# perturbed weights), plus a deliberately broken ONNX (resnet18's export cut short)
# and a model with an op no target supports (com.example::MyOp). `migc batch -j 2`
# must finish; the broken model fails with its reason, MyOp is in the blocking list,
# every torchvision model converts, builds and passes `migc verify --backend c`
# against torch; junit.xml validates against the JUnit XSD and report.html has one
# matrix row per model.
# usage: tests/e2e/batch_zoo.sh BUILD_DIR [WORKDIR]
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=$(cd "$BUILD" && pwd)
MIGC=$BUILD/migc
PY=/usr/bin/python3
. tests/e2e/zoo_lists.sh
. tests/e2e/par.sh
ZOO=${MIGC_ZOO:-$ZOO_TEST} # issue 6's twelve
fix=build/fixtures/batch-zoo
work=${2:-build/batch-zoo}
rm -rf "$work"
mkdir -p "$fix" "$work"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
if command -v ccache >/dev/null; then export CC="ccache cc" CCACHE_DIR=${CCACHE_DIR:-$ROOT/build/ccache}; fi

# reference folders (cached: torch_reference.py writes each once)
for m in ${ZOO//,/ }; do
  [ -f "$fix/$m/ref.json" ] ||
    $PY tools/torch_reference.py tests.fixtures.batch_models:$m --input-shape 1x3x224x224 --perturb \
      -o "$fix/$m" > "$fix/$m.log" 2>&1 || echo "torch_reference.py $m failed: $(tail -1 "$fix/$m.log")" &
  par_wait_slot
done
wait
[ -f "$fix/bad/custom_op.onnx" ] || $PY tests/fixtures/make_bad_models.py -o "$fix/bad" > /dev/null
head -c 200000 "$fix/resnet18/model.onnx" > "$work/broken.onnx"
{
  echo '{"version": 1, "defaults": {"targets": ["cpu"]}, "models": ['
  for m in ${ZOO//,/ }; do
    echo "  {\"name\": \"$m\", \"onnx\": \"$ROOT/$fix/$m/model.onnx\", \"weights\": \"$ROOT/$fix/$m/model.pth\", \"reference\": \"$ROOT/$fix/$m\"},"
  done
  echo '  {"name": "broken", "onnx": "broken.onnx"},'
  echo "  {\"name\": \"unsupported\", \"onnx\": \"$ROOT/$fix/bad/custom_op.onnx\", \"targets\": [\"cpu\", \"ascend\", \"mindspore\"]}"
  echo ']}'
} > "$work/zoo.json"
n_models=$(( $(echo "${ZOO//,/ }" | wc -w) + 2 ))
"$MIGC" batch --check "$work/zoo.json" > /dev/null && ok "the manifest ($n_models models) is valid" || bad "--check"

start=$SECONDS
"$MIGC" batch "$work/zoo.json" -o "$work/out" -j 2 > "$work/batch.log" 2>&1
rc=$?
echo "    batch -j 2: $((SECONDS - start)) s"
[ $rc = 1 ] && ok "batch -j 2 finished, exit 1 (the two bad models fail)" || bad "batch exit $rc: $(tail -3 "$work/batch.log")"
rep=$work/out/report.json
for m in ${ZOO//,/ }; do
  s=$(jq -r ".models[] | select(.name == \"$m\") | .status" "$rep" 2> /dev/null)
  t=$(jq -r ".models[] | select(.name == \"$m\") | .measurements.total_s" "$rep" 2> /dev/null)
  [ "$s" = pass ] && ok "$m: converted, built, parity pass (${t} s)" ||
    bad "$m: $(jq -r ".models[] | select(.name == \"$m\") | .reason" "$rep" 2> /dev/null)"
done
r=$(jq -r '.models[] | select(.name == "broken") | .reason' "$rep")
[ "$(jq -r '.models[] | select(.name == "broken") | .status' "$rep")" = fail ] && echo "$r" | grep -q malformed &&
  ok "broken: failed with its reason: $r" || bad "broken: $r"
for t in cpu ascend mindspore; do
  jq -r ".blocking_ops.$t[] | select(.op == \"com.example::MyOp\") | .models[]" "$rep" | grep -qx unsupported &&
    ok "com.example::MyOp in the $t blocking list" || bad "MyOp not blocking on $t"
done
[ "$(jq -r '.summary.models' "$rep")" = $n_models ] && ok "report: $n_models models" || bad "report models: $(jq .summary "$rep")"
xmllint --noout --schema tests/fixtures/junit-10.xsd "$work/out/junit.xml" 2> /dev/null &&
  ok "junit.xml validates against the JUnit XSD" || bad "junit.xml does not validate"
rows=$(grep -c '<tr data-model=' "$work/out/report.html")
[ "$rows" = $n_models ] && ok "report.html: $rows matrix rows" || bad "report.html: $rows rows"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
