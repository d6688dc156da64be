#!/bin/bash
# One command for the CUDA checks. From a full build (default: build), it writes the
# models to check (the default PTQ job's int8 and fp32 models by qfx ptq, and the
# float resnet18 / mobilenet_v2 fixtures for the benchmark), packs them with the CUDA
# test binary and the runtime benchmark (tools/gpu/bundle.sh), then runs
# tools/gpu/prove.sh on the bundle: every label-cuda test against the reference
# backend, then onednn against cuda side by side. On a machine without a CUDA device
# that is a dry run of the same steps: each cuda test reports skipped with its reason,
# NoDevice.* checks that nodes decline to the CPU, and the benchmark's cuda rows run
# on the CPU. Copy OUT_DIR/gpu.tar.xz to a GPU machine and run tools/gpu/prove.sh
# there when this one has no GPU. Exit status: prove.sh's (the cuda tests').
#   tools/gpu/verify.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
build=${1:-build} out=${2:-gpu_verify}
qfx=$build/tools/qfx
[ -x "$qfx" ] && [ -x "$build/tests/qfx_tests_cuda" ] || {
  echo "verify.sh: $build has no qfx or qfx_tests_cuda: build qfx first (README)" >&2
  exit 2
}
mkdir -p "$out"
"$qfx" ptq --set "output.dir=$out/ptq" --set output.report_html=false > "$out/ptq.log" 2>&1 ||
  { echo "verify.sh: qfx ptq failed (its log: $out/ptq.log)" >&2; exit 2; }
f=$build/fixtures/bench
tools/gpu/bundle.sh "$build" "$out/gpu.tar.xz" "$out/ptq/model_int8.onnx" "bench:$out/ptq/model_fp32.onnx" \
  "bench:$f/resnet18.onnx" "bench:$f/mobilenet_v2.onnx"
if nvidia-smi -L > /dev/null 2>&1; then
  echo "verify.sh: a GPU is present: the checks run on it"
else
  echo "verify.sh: no GPU here: a dry run (cuda tests skip with their reason; copy $out/gpu.tar.xz to a GPU machine" \
       "and run tools/gpu/prove.sh there)"
fi
QFX_BENCH_BATCHES=${QFX_BENCH_BATCHES:-1,32} tools/gpu/prove.sh "$out/gpu.tar.xz" "$out"
