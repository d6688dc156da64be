#!/bin/bash
# One command for the CUDA checks. From a full build (default: build), it writes the
# models to check with qfx ptq: the default job's int8 model under the onednn,
# tflite_like and example_accel arithmetics and its fp32 model, and int8 resnet18,
# mobilenet_v2 and resnet50 (torchvision, random weights, 8 calibration images); packs
# them with the CUDA test binary and the runtime benchmark (tools/gpu/bundle.sh, under
# 64 MiB), then runs tools/gpu/prove.sh on the bundle: every label-cuda test against the
# reference backend, the cuda benchmark of the three int8 torchvision models and, where
# python3 has torch with CUDA, PyTorch's own speed beside it. Where qfx itself runs on
# a GPU machine, it also runs the default job with calibration.device: cuda and compares
# its encodings with the CPU calibration's, runs the libtorch training tests on the GPU
# (qfx_tests_torch_cuda), and trains the default QAT job with training.device: cuda and
# cpu and compares them (tools/gpu/compare_qat.py). On a machine without a CUDA device this is a
# dry run of the same steps: each cuda test reports skipped with its reason,
# NoDevice.* checks that nodes decline to the CPU, and the benchmark's cuda rows run on
# the CPU (batch 1 only). Copy OUT_DIR/gpu.tar.xz to a GPU machine and run
# tools/gpu/prove.sh there when this one has no GPU. Exit status: prove.sh's, else 1
# when a GPU check of this script failed.
#   tools/gpu/verify.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
build=${1:-build} out=${2:-gpu_verify}
qfx=$build/tools/qfx
[ -x "$qfx" ] && [ -x "$build/tests/qfx_tests_cuda" ] || {
  echo "verify.sh: $build has no qfx or qfx_tests_cuda: build qfx first (README)" >&2
  exit 2
}
mkdir -p "$out/models"
ptq() {  # ptq NAME ARGS...: qfx ptq into $out/NAME, its log beside it
  local name=$1
  shift
  "$qfx" ptq "$@" --set "output.dir=$out/$name" --set output.report_html=false > "$out/$name.log" 2>&1 ||
    { echo "verify.sh: qfx ptq failed (its log: $out/$name.log)" >&2; exit 2; }
}
for be in onednn tflite_like example_accel; do
  extra=()
  [ "$be" = example_accel ] && extra=(--set qconfig.global.weight.granularity=per_tensor)  # per-tensor weights only
  ptq "fashion_$be" --set "backend=$be" "${extra[@]}" --set evaluation.num_samples=200
  cp "$out/fashion_$be/model_int8.onnx" "$out/models/fashion_${be}_int8.onnx"
done
cp "$out/fashion_onednn/model_fp32.onnx" "$out/models/fashion_fp32.onnx"
bench=$build/fixtures/bench
[ -f "$bench/resnet50.pt" ] ||
  "${QFX_PYTHON:-.venv/bin/python}" tools/fixtures/export_onnx.py "$build/fixtures" bench resnet50 > /dev/null
for arch in resnet18 mobilenet_v2 resnet50; do
  config=configs/examples/${arch}_ptq.yaml
  [ "$arch" = resnet50 ] && config=configs/examples/resnet18_ptq.yaml  # the same recipe
  ptq "$arch" "$config" --set "model.path=$bench/$arch.pt" --set evaluation=null \
    --set calibration.num_samples=8 --set calibration.batch_size=8
  cp "$out/$arch/model_int8.onnx" "$out/models/${arch}_int8.onnx"
done
m=$out/models
tools/gpu/bundle.sh "$build" "$out/gpu.tar.xz" "$m"/fashion_*.onnx "bench:$m/resnet18_int8.onnx" \
  "bench:$m/mobilenet_v2_int8.onnx" "bench:$m/resnet50_int8.onnx"
checks=0  # the GPU-only checks below: 1 when one failed (the others still run)
if nvidia-smi -L > /dev/null 2>&1; then
  echo "verify.sh: a GPU is present: the checks run on it"
  batches=1,32,256
  ptq fashion_gpu_calibration --set calibration.device=cuda --set evaluation.num_samples=200
  # The float passes ran in cuDNN / cuBLAS: values differ in summation order, and a
  # histogram bin count with them.
  python3 tools/gpu/compare_encodings.py "$out/fashion_onednn/encodings.json" "$out/fashion_gpu_calibration/encodings.json" \
    --rtol 5e-3 --zp-tolerance 1 || checks=1
  # Calibration speed with histogram observers, resnet50: the runtime on the CPU against
  # libtorch on the GPU with in-place counts (issue goal: 20x the CPU's images/s).
  for dev in cpu cuda; do
    ptq "calibration_$dev" configs/examples/resnet18_ptq.yaml --set "model.path=$bench/resnet50.pt" --set evaluation=null \
      --set "calibration.device=$dev"
  done
  python3 -c "import json; c, g = (json.load(open(f'$out/calibration_{d}/report.json'))['calibration'] for d in ('cpu', 'cuda'));
print(f\"calibration of resnet50 (histogram observers): cpu {c['images_per_s']:.1f} img/s ({c['engine']}), \"
      f\"cuda {g['images_per_s']:.1f} img/s ({g['engine']}): {g['images_per_s'] / c['images_per_s']:.1f}x\")" |
    tee "$out/calibration_speed.txt"
  "$build/tests/qfx_tests_torch_cuda" --gtest_output="xml:$out/torch_cuda_tests.xml" 2>&1 | tee "$out/torch_cuda_tests.log" ||
    checks=1
  for dev in cpu cuda; do
    "$qfx" qat --set "training.device=$dev" --set training.max_steps=300 --set evaluation.num_samples=2000 \
      --set "output.dir=$out/qat_$dev" --set output.report_html=false > "$out/qat_$dev.log" 2>&1 ||
      { echo "verify.sh: qfx qat on $dev failed (its log: $out/qat_$dev.log)" >&2; exit 2; }
  done
  python3 tools/gpu/compare_qat.py "$out/qat_cpu/report.json" "$out/qat_cuda/report.json" || checks=1
else
  echo "verify.sh: no GPU here: a dry run (cuda tests skip with their reason; copy $out/gpu.tar.xz to a GPU machine" \
       "and run tools/gpu/prove.sh there)"
  batches=1
  export QFX_TORCH_BENCH=none
fi
rc=0
QFX_BENCH_BACKENDS=${QFX_BENCH_BACKENDS:-cuda} QFX_BENCH_BATCHES=${QFX_BENCH_BATCHES:-$batches} \
  tools/gpu/prove.sh "$out/gpu.tar.xz" "$out" || rc=$?
[ "$checks" -eq 0 ] || echo "verify.sh: a GPU check above failed"
[ "$rc" -ne 0 ] && exit "$rc"
exit "$checks"
