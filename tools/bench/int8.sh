#!/usr/bin/env bash
# Latency benchmark, side by side in one run per model: qfx fp32 against frozen
# libtorch fp32, observer-tap cost, and qfx int8 (the model qfx ptq produces)
# against qfx fp32 and against PyTorch 1.13's FX int8 model (onednn engine).
#   tools/bench/int8.sh [BUILD_DIR]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=2
for arch in resnet18 mobilenet_v2; do
  "$build/tools/qfx" ptq "$src/configs/examples/${arch}_ptq.yaml" --set evaluation=null \
    --set output.dir="$tmp/$arch" >"$tmp/$arch.log" 2>&1 || { cat "$tmp/$arch.log" >&2; exit 1; }
  # The int8 model takes 224x224 inputs, as the benchmark models.
  "$build/tools/qfx" bench "$build/fixtures/bench/$arch.pt" "$build/fixtures/bench/$arch.onnx" --batch 1 32 \
    --int8 "$tmp/$arch/model_int8.onnx" --pytorch-int8 "$src/tools/bench/pytorch_calibration.py" --arch "$arch"
done
