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

/// The observer taps' fixed-range histogram (TapKind::kHistogram) computed on the
/// GPU: adds to counts[0, bins) how many of the `n` (> 0) float values at host
/// pointer `x` fall in each of `bins` equal bins over [lo_edge, hi_edge) (the same
/// bin rule as the CPU taps, hd::histogram_bin in arith_hd.h: equal counts on equal
/// data), and sets *lo / *hi to the values' min and max (NaN values are not counted
/// in the min and max). Throws ExecutionError when CUDA is unavailable or fails.
void cuda_histogram(const float* x, int64_t n, float lo_edge, float hi_edge, int64_t bins, double* counts, float* lo,
                    float* hi);

/// The calibration histogram observer's count (quant's HistogramObserver, calibration
/// device cuda) on the GPU: adds to counts[0, bins) how many of the `n` (> 0) float
/// values at host pointer `x` fall in each bin of lattice `g`, bins clamped to
/// [0, bins) (hd::HistogramLattice::counted_bin, the CPU observer's rule: equal counts
/// on equal data); *lo / *hi receive the min and max (NaN excluded), *nonfinite whether
/// any value is NaN or Inf. Throws ExecutionError when CUDA is unavailable or fails.
void cuda_lattice_histogram(const float* x, int64_t n, const hd::HistogramLattice& g, int64_t bins, double* counts,
                            float* lo, float* hi, bool* nonfinite);

}  // namespace qfx::runtime
