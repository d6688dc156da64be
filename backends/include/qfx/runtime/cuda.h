// The CUDA backend's public entry points beyond the kernel registry: whether it can
// run here, and the observer histogram computed on the GPU.
#pragma once

#include <cstdint>
#include <string>

#include "qfx/runtime/arith_hd.h"

namespace qfx::runtime {

/// True when qfx was built with CUDA (QFX_WITH_CUDA and nvcc found at configure time).
bool cuda_built();

/// Empty when the `cuda` backend can run kernels here; otherwise why not ("qfx was
/// built without CUDA", "no CUDA-capable device is detected", ...).
std::string cuda_unavailable_reason();

/// The calibration histogram observer's count (quant's HistogramObserver, calibration
/// device cuda) on the GPU: adds to counts[0, bins) how many of the `n` (> 0) float
/// values at host pointer `x` fall in each bin of lattice `g`, bins clamped to
/// [0, bins) (hd::HistogramLattice::counted_bin, the CPU observer's rule: equal counts
/// on equal data); *lo / *hi receive the min and max (NaN excluded), *nonfinite whether
/// any value is NaN or Inf. `resident`: `x` points to device memory of the current
/// device (a CUDA tensor's data, complete before the call: its producer's stream has
/// been synchronised), which is read in place. Throws ExecutionError when CUDA is
/// unavailable or fails.
void cuda_lattice_histogram(const float* x, int64_t n, const hd::HistogramLattice& g, int64_t bins, double* counts,
                            float* lo, float* hi, bool* nonfinite, bool resident = false);

}  // namespace qfx::runtime
