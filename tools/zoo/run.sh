#!/usr/bin/env bash
# Every torchvision classification architecture of the zoo and the other model families
# (segmentation, detection, 1-D audio, GroupNorm / InstanceNorm, recurrent; tools/zoo/zoo.py list)
# through `qfx ptq` from its torch.export program (its TorchScript file where torch.export
# fails) with the cosine metric, compared with torch.ao FX PTQ and PT2E (torchao's
# X86InductorQuantizer) on the same random weights and inputs, and the int8 model run
# by ONNX Runtime. Prints the
# docs/zoo.md's table; exit status 1 if any row fails its rule (zoo.py row).
#
#   tools/zoo/run.sh [-o DIR] [ARCH ...]      (default: all, DIR build/zoo)
#
# Needs a build (build/tools/qfx or $QFX) and a Python with torch, torchvision and
# onnxruntime ($QFX_PYTHON, default the .venv that tools/install_deps.sh makes).
# About 15 minutes on a 2-core machine, plus about 13 for the exports the first time
# (they are kept and reused).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$root/build/zoo
if [ "${1:-}" = "-o" ]; then out=$2; shift 2; fi
QFX=${QFX:-$root/build/tools/qfx}
PY=${QFX_PYTHON:-$root/.venv/bin/python}
[ -x "$QFX" ] || { echo "run.sh: $QFX not found: build qfx first (README)" >&2; exit 2; }
mkdir -p "$out"
archs=("$@")
[ ${#archs[@]} -gt 0 ] || mapfile -t archs < <("$PY" "$here/zoo.py" list | cut -d' ' -f1)
fail=0
rows=()
for arch in "${archs[@]}"; do
  log=$out/$arch.log
  : >"$log"
  echo "== $arch" >&2
  if [ ! -f "$out/$arch.torch_ao.json" ] || [ ! -f "$out/$arch.pt" ] ||
     ! grep -q '"pt2e"' "$out/$arch.torch_ao.json"; then
    "$PY" "$here/zoo.py" export "$arch" "$out" >>"$log" 2>&1 || {
      echo "   export failed (see $log)" >&2; rows+=("| $arch | export failed | | | | | | | | | **no** |"); fail=1; continue; }
  fi
  size=$("$PY" -c "import json; print(json.load(open('$out/$arch.torch_ao.json'))['size'])")
  # The input shape and the evaluated output (the key "out" of a segmentation model's dictionary).
  shape=$("$PY" -c "import json; print(json.load(open('$out/$arch.torch_ao.json')).get('input_shape', [-1, 3, $size, $size]))")
  output=$("$PY" -c "import json; print(json.load(open('$out/$arch.torch_ao.json')).get('output', 0))")
  # A detector: its post-processing kept whole (a wrap entry) and left to the host; boxes compared.
  metric=$("$PY" -c "import json; print(json.load(open('$out/$arch.torch_ao.json')).get('metric', 'cosine'))")
  wrap=$("$PY" -c "import json; w = json.load(open('$out/$arch.torch_ao.json')).get('wrap'); print('[\"%s\"]' % w if w else '[]')")
  model=$out/$arch.pt2  # the exported program; the TorchScript file where torch.export failed
  [ -f "$model" ] || model=$out/$arch.pt
  rm -rf "${out:?}/$arch"
  if ! "$QFX" ptq --set model.path="$model" --set "model.input_shape=$shape" --set evaluation.output="$output" \
      --set "calibration.data={format: npy, images: $out/$arch.cal.npy}" --set calibration.num_samples=32 \
      --set calibration.batch_size=8 --set "evaluation.data={format: npy, images: $out/$arch.eval.npy}" \
      --set "tracer.wrap=$wrap" --set evaluation.metric="$metric" --set evaluation.batch_size=8 --set evaluation.sqnr_samples=0 \
      --set evaluation.reference_check=4 \
      --set output.dir="$out/$arch" >>"$log" 2>&1; then
    echo "   qfx ptq failed: $(grep 'qfx: error' "$log" | head -1)" >&2
    rows+=("| $arch | $size | qfx ptq failed: $(grep 'qfx: error' "$log" | head -1 | cut -c1-200 | tr '|' '/') | | | | | | | | **no** |")
    fail=1; continue
  fi
  if ! { "$QFX" run "$out/$arch/model_int8.onnx" -i "$out/$arch.eval.npy" -o "$out/$arch.qfx.npy" &&
         "$PY" "$root/tools/ort_check/run.py" "$out/$arch/model_int8.onnx" "$out/$arch.ort.npy" "$out/$arch.eval.npy" &&
         ORT_OPT=disabled "$PY" "$root/tools/ort_check/run.py" "$out/$arch/model_int8.onnx" "$out/$arch.ort_plain.npy" \
           "$out/$arch.eval.npy"; } >>"$log" 2>&1; then
    echo "   qfx run / ONNX Runtime failed (see $log)" >&2
    rows+=("| $arch | $size | ONNX Runtime failed | | | | | | | | **no** |"); fail=1; continue
  fi
  r=$("$PY" "$here/zoo.py" row "$arch" "$out") || fail=1
  echo "   $r" >&2
  rows+=("$r")
done
"$PY" "$here/zoo.py" header
printf '%s\n' "${rows[@]}"
exit $fail
