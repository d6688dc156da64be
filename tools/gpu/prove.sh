#!/bin/bash
# The CUDA checks on a GPU machine, from a bundle made by tools/gpu/bundle.sh:
# every ctest label-cuda test (op by op, histograms, whole models) against the
# reference backend, then the runtime benchmark (oneDNN on the machine's CPU against
# the GPU), and, where python3 has torch with CUDA, PyTorch's own speed on the same GPU
# (tools/gpu/pytorch_bench.py) beside it. Writes the log, the GoogleTest XML and the
# benchmark tables to OUT_DIR (default .).
#   tools/gpu/prove.sh BUNDLE.tar.xz [OUT_DIR]
# QFX_BENCH_BACKENDS (default onednn,cuda), QFX_BENCH_BATCHES (default 1,32,128) and
# QFX_TORCH_BENCH (models for pytorch_bench.py, default resnet18,resnet50,mobilenet_v2;
# "none" skips it) choose what the benchmarks run.
set -uo pipefail
bundle=$1 out=${2:-.}
root=$(mktemp -d)
tar -C "$root" -xJf "$bundle"
cuda_libs=$(ldconfig -p | awk '/libcublasLt\.so\.13/{print $NF}' | head -1 | xargs -r dirname)
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -z "$cuda_libs" ] && [ -e "$d/libcublasLt.so.13" ] && cuda_libs=$d
done
export LD_LIBRARY_PATH="$root/lib:${cuda_libs}:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
echo "cuBLASLt from: ${cuda_libs:-not found}"
if ldd "$root/bin/qfx_tests_cuda" | grep "not found"; then
  echo "prove.sh: libraries missing (above)"
  exit 2
fi
QFX_CUDA_MODELS="$root/models" "$root/bin/qfx_tests_cuda" --gtest_output="xml:$out/cuda_tests.xml" 2>&1 | tee "$out/cuda_tests.log"
rc=${PIPESTATUS[0]}
echo "prove.sh: qfx_tests_cuda exit $rc"
# Latency side by side on this machine: oneDNN on its CPU cores against the GPU, for
# the models bundled as bench:PATH.
bench=$(sed "s|^|$root/models/|" "$root/bench.txt" | tr '\n' ' ')
if [ -n "${bench// /}" ]; then
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc)"
  # shellcheck disable=SC2086
  "$root/bin/qfx_runtime_bench" $bench --backends "${QFX_BENCH_BACKENDS:-onednn,cuda}" --batch "${QFX_BENCH_BATCHES:-1,32,128}" --iters 20 2>&1 | tee "$out/bench.md"
fi
torch_models=${QFX_TORCH_BENCH:-resnet18,resnet50,mobilenet_v2}
if [ "$torch_models" != none ] && python3 -c 'import torch, torchvision; assert torch.cuda.is_available()' 2>/dev/null; then
  python3 "$(dirname "$0")/pytorch_bench.py" --models "$torch_models" --batch "${QFX_BENCH_BATCHES:-1,32,128}" 2>&1 |
    tee "$out/pytorch_bench.md"
fi
exit "$rc"
