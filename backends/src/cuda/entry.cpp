// The CUDA backend's registration and public entry points (qfx/runtime/cuda.h).
#include <cmath>
#include <cstring>
#include <vector>

#include "device.h"
#include "qfx/error.h"
#include "qfx/runtime/cuda.h"
#include "staging.h"

namespace qfx::runtime {

bool cuda_built() { return true; }

std::string cuda_unavailable_reason() { return cuda::no_device_reason(); }

void register_cuda_kernels() {
  BackendInfo info{"cuda", "onednn",
                   "CUDA kernels (int8 conv / gemm through cuBLASLt, fp32 through cuBLAS), then oneDNN, then the reference", {}};
  // Values between two CUDA kernels stay on the device, in one arena per plan.
  info.device_alloc = [](size_t bytes) {
    cuda::DeviceMem m(bytes, "the plan's device values");
    return std::shared_ptr<uint8_t[]>(m.as<uint8_t>(), [m](uint8_t*) {});
  };
  info.device_to_host = [](void* host, const void* device, size_t bytes) {
    cuda::to_host(host, device, bytes, cuda::stream());
    cuda::finish(cuda::stream(), "copying a device value to the host");
  };
  add_backend(info);
  cuda::register_conv_kernels();
  cuda::register_eltwise_kernels();
  cuda::register_float_kernels();
}

void cuda_lattice_histogram(const float* x, int64_t n, const hd::HistogramLattice& g, int64_t bins, double* counts,
                            float* lo, float* hi, bool* nonfinite, bool resident) {
  using namespace cuda;
  const std::string& why = no_device_reason();
  if (!why.empty()) throw ExecutionError("cuda_lattice_histogram: no CUDA device can run kernels (" + why + ")");
  if (n <= 0 || bins <= 0 || bins > (int64_t{1} << 30)) throw ExecutionError("cuda_lattice_histogram: needs n > 0 values and 0 < bins <= 2^30");
  // Buffers kept per thread between calls: calibration counts thousands of tensors.
  thread_local DeviceMem dx, dc, dm;
  thread_local PinnedMem px;
  thread_local size_t cap_x = 0, cap_c = 0;
  const size_t bx = static_cast<size_t>(n) * 4, bc = static_cast<size_t>(bins) * 8;
  if (!resident && cap_x < bx) dx = DeviceMem(bx, "histogram values"), px = PinnedMem(bx, "histogram values"), cap_x = bx;
  if (cap_c < bc) dc = DeviceMem(bc, "histogram counts"), cap_c = bc;
  if (!dm.get()) dm = DeviceMem(16, "histogram min / max");
  cudaStream_t s = stream();
  if (!resident) {
    std::memcpy(px.get(), x, bx);
    to_device(dx.get(), px.get(), bx, s);
  }
  fill_zero(dc.get(), bc, s);
  const float init[2] = {INFINITY, -INFINITY};
  const unsigned zero = 0;
  to_device(dm.get(), init, 8, s);
  to_device(dm.as<char>() + 8, &zero, 4, s);
  launch_lattice_histogram(resident ? x : dx.as<float>(), n, g, bins, dc.as<unsigned long long>(), dm.as<float>(),
                           reinterpret_cast<unsigned*>(dm.as<char>() + 8), s);
  std::vector<unsigned long long> c(static_cast<size_t>(bins));
  float mm[2];
  unsigned nf = 0;
  to_host(c.data(), dc.get(), bc, s);
  to_host(mm, dm.get(), 8, s);
  to_host(&nf, dm.as<char>() + 8, 4, s);
  finish(s, "cuda_lattice_histogram");
  for (int64_t b = 0; b < bins; ++b) counts[b] += static_cast<double>(c[static_cast<size_t>(b)]);
  *lo = mm[0];
  *hi = mm[1];
  *nonfinite = nf != 0;
}

}  // namespace qfx::runtime
