# Sourced: small_refs_ensure makes the tools/torch_reference.py folders of issue 7's
# small models (and resnet18 / mobilenet_v2 at small sizes) in build/fixtures/ms_verify,
# once: they are rebuilt only when the scripts that make them change. The MindSpore
# and Ascend verify suites share them. Sets small_refs to the folder; returns 1 (with
# the log's tail on stdout) when making them failed.
small_refs_ensure() {
  local PY=/usr/bin/python3 want log
  small_refs=build/fixtures/ms_verify
  want=$(sha256sum tools/torch_reference.py tests/fixtures/parity_models.py tests/fixtures/export_torchvision.py \
         tests/fixtures/ms_verify_models.py | sha256sum | cut -c1-16)
  [ "$(cat "$small_refs/.stamp" 2>/dev/null)" = "$want" ] && return 0
  rm -rf "$small_refs" && mkdir -p "$small_refs"
  log=$small_refs.log
  local T="$PY tools/torch_reference.py tests.fixtures.parity_models" fx=$small_refs
  { $T:resnet18 --input-shape 1x3x64x64 --perturb --bn-stats random -o "$fx/resnet18" &&
    $T:mobilenet_v2 --input-shape 1x3x96x96 --seed 2 --perturb --bn-stats random -o "$fx/mobilenet_v2" &&
    $T:lstm --input-shape 2x9x16 --perturb -o "$fx/lstm" &&
    $T:transformer_encoder --input-shape 2x9x32 --perturb -o "$fx/transformer_encoder" &&
    $T:conv1d_gn_prelu --input-shape 2x8x32 --perturb -o "$fx/conv1d_gn_prelu" &&
    $T:tokens_and_features --input-shape 2x9 --input-shape 2x9x16 --input-dtype int64 --input-dtype float32 \
      --input-high 100 --perturb -o "$fx/tokens_and_features" &&
    $PY tools/torch_reference.py tests.fixtures.ms_verify_models:topk_mlp --input-shape 2x8 --perturb -o "$fx/topk_mlp" &&
    $PY tools/torch_reference.py tests.fixtures.ms_verify_models:relpos --input-shape 2x3x4x4 --perturb -o "$fx/relpos"
  } > "$log" 2>&1 && echo "$want" > "$fx/.stamp" && return 0
  echo "FAIL fixtures: $(tail -2 "$log")"
  return 1
}
