#!/usr/bin/env bash
# Latency benchmark, side by side in one run per model, with this machine's measured
# peak (qfx bench --peak): qfx fp32 against frozen libtorch fp32, observer-tap cost,
# and qfx int8 (the model qfx ptq produces) against qfx fp32 and against PyTorch's own
# int8 models (torch.ao FX on the onednn engine, and PT2E: torchao's prepare_pt2e /
# convert_pt2e with the X86InductorQuantizer, torch.compile); resnet18 and mobilenet_v2
# at batch 1 and 32,
# resnet50 at batch 32 (exported here on first use: about 200 MB).
#   tools/bench/int8.sh [BUILD_DIR]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=2
export QFX_PYTHON="${QFX_PYTHON:-$src/.venv/bin/python}"  # qfx bench runs PyTorch's side with it
bench="$build/fixtures/bench"
[ -f "$bench/resnet50.pt" ] || "$QFX_PYTHON" "$src/tools/fixtures/export_onnx.py" "$build/fixtures" bench resnet50 >/dev/null
for arch in resnet18 mobilenet_v2 resnet50; do
  config="$src/configs/examples/${arch}_ptq.yaml" batches=(1 32)
  if [ "$arch" = resnet50 ]; then  # resnet18's config on the benchmark's resnet50 (traced TorchScript)
    config="$src/configs/examples/resnet18_ptq.yaml" batches=(32)
  fi
  "$build/tools/qfx" ptq "$config" --set model.path="$bench/$arch.pt" --set evaluation=null \
    --set output.dir="$tmp/$arch" >"$tmp/$arch.log" 2>&1 || { cat "$tmp/$arch.log" >&2; exit 1; }
  grep "int8 model on runtime backend" "$tmp/$arch.log"
  # The int8 model takes 224x224 inputs, as the benchmark models.
  "$build/tools/qfx" bench "$bench/$arch.pt" "$bench/$arch.onnx" --peak --batch "${batches[@]}" \
    --int8 "$tmp/$arch/model_int8.onnx" --pytorch-int8 "$src/tools/bench/pytorch_calibration.py" --arch "$arch" \
    --pytorch-flow fx pt2e
done
