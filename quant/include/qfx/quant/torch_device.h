// libtorch devices for training: which one a config names, and libtorch's CUDA side.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace qfx::quant {

/// The libtorch device a config value (`training.device`, `calibration.device`) names:
/// "cpu", "cuda" or "cuda:N" (N >= 0).
/// Throws ConfigError naming `key` for anything else. Does not check that the device
/// exists (`torch_device_unavailable_reason` does).
c10::Device parse_torch_device(const std::string& value, const std::string& key);

/// "" when ATen can run on `device`, otherwise why not. The CPU always can. For a CUDA
/// device this loads libtorch's CUDA library first, once: qfx links libtorch's CPU
/// libraries only (qfx::torch_cpu), so ATen's CUDA kernels are absent until
/// `libtorch_cuda.so`, from the folder of the `libtorch_cpu.so` the process runs with,
/// is loaded (dlopen, RTLD_GLOBAL: its static registrations add the CUDA kernels to
/// the dispatcher). The reasons: a CPU-only libtorch (no `libtorch_cuda.so` there), a
/// library that fails to load (the loader's message), no CUDA device (with the CUDA
/// runtime's reason where qfx's own CUDA backend can tell it), or an index beyond the
/// devices libtorch sees. Thread-safe.
std::string torch_device_unavailable_reason(const c10::Device& device);

/// Turns TF32 off in libtorch's cuDNN convolutions and cuBLAS matrix products, so
/// float32 work on a GPU keeps float32's precision as on the CPU (calibration and
/// training on a CUDA device call it; TF32 would round products to 10 mantissa bits).
void use_full_fp32_on_gpu();

/// True once `torch_device_unavailable_reason` has loaded libtorch's CUDA library and
/// ATen has CUDA kernels, even where no device can run them.
bool torch_cuda_kernels_loaded();

}  // namespace qfx::quant
