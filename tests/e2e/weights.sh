#!/bin/bash
# migc weights end to end, checked by the independent decoder
# ../shared/acceptance/check-ckpt.py: torchvision state_dicts in every source format
# (zip .pth, legacy .pth, .safetensors, a checkpoint dict with optimizer state) give
# .ckpt files whose every value equals the torch tensor bit for bit under the
# expected MindSpore name; default (BatchNorm-folded) exports bind 100% of their
# initializers with --graph; bad inputs (a flipped bit under a zip CRC too) exit 2
# and leave no output.
# usage: tests/e2e/weights.sh BUILD_DIR [MODELS]
set -u
BUILD=${1:-build}
MODELS=${2:-resnet18,mobilenet_v2,efficientnet_b0,vit_b_16,convnext_tiny}
cd "$(dirname "$0")/../.."
. tests/e2e/par.sh
MIGC=$BUILD/migc
tv=build/fixtures/tv
work=build/fixtures/weights
mkdir -p "$tv" "$work"
/usr/bin/python3 tests/fixtures/export_torchvision.py -o "$tv" --models "$MODELS" --opsets 17 --modes default >/dev/null ||
  { echo "export failed"; exit 1; }
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
check() { # label ckpt pth model [check-ckpt args]
  local label=$1 ckpt=$2 pth=$3 model=$4; shift 4
  if res=$(/usr/bin/python3 ../shared/acceptance/check-ckpt.py "$ckpt" "$pth" --torchvision "$model" "$@" 2>&1 | tail -1) &&
     [[ $res == *" 0 failed" ]]; then ok "$label: $res"; else bad "$label: $res"; fi
}
# one_model MODEL: every source format of one model, in a subshell of its own (the
# models run side by side; each check is a Python process that loads torch); its
# last line counts what passed and failed
one_model() {
  local model=$1 v form src out
  pass=0 fail=0
  v=$work/$model
  [ -f "$v/${model}_ckpt.pth" ] && [ -f "$v/bad_crc.pth" ] || /usr/bin/python3 tests/fixtures/make_weight_variants.py "$tv/$model.pth" "$v" >/dev/null
  for form in zip.pth legacy.pth safetensors; do
    src=$v/${model}_$form; [ "$form" = safetensors ] && src=$v/$model.safetensors
    out=$v/out_${form%%.*}.ckpt
    rm -f "$out"
    if "$MIGC" weights "$src" -o "$out" >/dev/null 2>"$v/err"; then check "$model $form" "$out" "$tv/$model.pth" "$model"
    else bad "$model $form: $(head -1 "$v/err")"; fi
  done
  rm -f "$v/out_dict.ckpt"
  if "$MIGC" weights "$v/${model}_ckpt.pth" --key state_dict -o "$v/out_dict.ckpt" >/dev/null 2>"$v/err"; then
    check "$model checkpoint dict --key state_dict" "$v/out_dict.ckpt" "$tv/$model.pth" "$model"
  else bad "$model checkpoint dict: $(head -1 "$v/err")"; fi
  echo "COUNTS $pass $fail"
}
logs=()
for model in ${MODELS//,/ }; do
  logs+=("$work/$model.checks")
  ( one_model "$model" > "$work/$model.checks" 2>&1 ) &
  par_wait_slot
done
wait
par_collect "${logs[@]}"
# dtype conversion and the CRC trailer, on one model
m=${MODELS%%,*}; v=$work/$m
for dt in fp16 bf16; do
  rm -f "$v/out_$dt.ckpt"
  if "$MIGC" weights "$v/${m}_zip.pth" --dtype $dt --crc -o "$v/out_$dt.ckpt" >/dev/null 2>"$v/err"; then
    check "$m --dtype $dt --crc" "$v/out_$dt.ckpt" "$tv/$m.pth" "$m" --dtype $dt
  else bad "$m --dtype $dt: $(head -1 "$v/err")"; fi
done
# binding default exports (BatchNorm folded, anonymous initializer names)
for model in resnet18 mobilenet_v2; do
  case ",$MODELS," in *",$model,"*) ;; *) continue ;; esac
  v=$work/$model
  rm -f "$v/bound.ckpt" "$v/map.json"
  line=$("$MIGC" weights "$v/${model}_zip.pth" --graph "$tv/${model}_op17_default.onnx" -o "$v/bound.ckpt" \
    --map-out "$v/map.json" 2>"$v/err" | grep '^binding:')
  total=$(jq '[.initializers[] | select(.binding != "constant")] | length' "$v/map.json" 2>/dev/null || echo 0)
  bound=$(jq '[.initializers[] | select(.binding != "constant" and .binding != "unbound")] | length' "$v/map.json" 2>/dev/null || echo -1)
  if [ "$total" -gt 0 ] && [ "$total" = "$bound" ]; then ok "$model --graph default export: $line"
  else bad "$model --graph default export: $line $(head -1 "$v/err")"; fi
done
# bad input: exit 2, a diagnostic naming the problem, no output left behind
badcase() { # file expect-substring [args]
  local f=$1 want=$2; shift 2
  rm -f "$work/bad.ckpt"
  "$MIGC" weights "$f" -o "$work/bad.ckpt" "$@" >/dev/null 2>"$work/err"; local rc=$?
  if [ $rc -eq 2 ] && grep -qi -- "$want" "$work/err" && [ ! -e "$work/bad.ckpt" ] &&
     [ -z "$(ls "$work" | grep -E '^bad\.ckpt\.')" ]; then ok "rejects $(basename "$f"): $(head -1 "$work/err")"
  else bad "$(basename "$f"): rc=$rc, $(head -1 "$work/err")"; fi
}
v=$work/$m
badcase "$v/bad_os_system.pth" "os.system\|posix.system"
badcase "$v/bad_eval.pth" "builtins\.eval\|__builtin__\.eval"
badcase "$v/bad_truncated.pth" ""
badcase "$v/bad_missing_storage.pth" "storage"
badcase "$v/bad_short_storage.pth" "short"
badcase "$v/bad_crc.pth" "corrupt"
badcase "$v/bad_dtype.safetensors" "Q7"
head -c 1000 "$v/out_zip.ckpt" > "$work/corrupt.ckpt"
if "$MIGC" ckpt dump "$work/corrupt.ckpt" >/dev/null 2>"$work/err"; then bad "truncated ckpt accepted"
elif [ $? -eq 2 ]; then ok "rejects a truncated .ckpt: $(head -1 "$work/err")"; else bad "truncated ckpt: wrong exit"; fi
# an existing output is refused without --force, and an input is never overwritten
if "$MIGC" weights "$v/${m}_zip.pth" -o "$v/out_zip.ckpt" >/dev/null 2>&1; then bad "overwrote an existing output"
else ok "refuses an existing output without --force"; fi
if "$MIGC" weights "$v/${m}_zip.pth" -o "$v/${m}_zip.pth" --force >/dev/null 2>&1; then bad "overwrote its input"
else ok "refuses to overwrite its input"; fi
# invalid rules files: exit 2 with file:line:reason
printf '<naming>\n  <module type="X">\n    <param torch="weight" ms="w"\n</naming>\n' > "$work/broken.xml"
printf '<naming>\n  <module type="X">\n    <param torch="weight"/>\n  </module>\n</naming>\n' > "$work/noms.xml"
printf '<naming>\n  <rename match="(" replace="x"/>\n</naming>\n' > "$work/badre.xml"
for r in broken.xml:4 noms.xml:3 badre.xml:2; do
  rm -f "$work/bad.ckpt"
  "$MIGC" weights "$v/${m}_zip.pth" --rules "$work/${r%%:*}" -o "$work/bad.ckpt" >/dev/null 2>"$work/err"; rc=$?
  # libxml2 places a syntax error where it noticed it, which may be past the bad tag
  if [ $rc -eq 2 ] && { grep -q "${r%%:*}:${r##*:}:" "$work/err" ||
       { [ "${r%%:*}" = broken.xml ] && grep -qE "broken.xml:[0-9]+: " "$work/err"; }; }; then
    ok "rules error ${r%%:*}: $(head -1 "$work/err")"
  else bad "rules error ${r%%:*}: rc=$rc $(head -1 "$work/err")"; fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
