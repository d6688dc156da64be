// Calibration algorithms: statistics (a histogram of observed values) -> the
// clipping range that qparams are computed from.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "qfx/quant/qparams.h"

namespace qfx::quant {

/// A histogram of observed float values: `counts[i]` values fell in
/// [lo + i*width, lo + (i+1)*width). `min`/`max` are the exact observed extremes.
struct Histogram {
  double lo = 0.0;
  double width = 0.0;
  std::vector<double> counts;
  float min = 0.0f;
  float max = 0.0f;
  /// Total count.
  double total() const;
  /// Centre of bin i.
  double center(size_t i) const { return lo + (static_cast<double>(i) + 0.5) * width; }
};

/// The algorithms that turn statistics into a clipping range.
enum class Algorithm {
  kMinMax,      ///< the observed min/max
  kPercentile,  ///< clip at a percentile of the distribution (of |x| when symmetric)
  kEntropy,     ///< minimise KL(P||Q) (TensorRT, "8-bit Inference with TensorRT", Migacz 2017)
  kMSE,         ///< minimise the expected squared quantization error over clipping ranges
  kAuto,        ///< per tensor, whichever of the above has the least squared error
};
/// "minmax", "percentile", "entropy", "mse", "auto".
const char* algorithm_name(Algorithm a);
/// Parses the names above ("kl" is accepted for entropy). Throws qfx::ConfigError.
Algorithm parse_algorithm(const std::string& s);

/// Tuning of the algorithms.
struct AlgorithmOptions {
  double percentile = 99.99;  ///< kPercentile: percent of values kept inside the range (50..100)
  int mse_steps = 64;         ///< kMSE: clipping candidates per side
  int entropy_stride = 0;     ///< kEntropy (affine windows): candidate stride in bins; 0 = automatic
};

/// Clipping range [lo, hi] chosen by `algo` for quantizing with `spec`.
/// kEntropy is symmetric (TensorRT's |x| threshold search) when `spec` is symmetric
/// and searches asymmetric windows [a, b] otherwise. `chosen` (optional) receives
/// the algorithm actually used (kAuto resolves to one of the others).
/// An empty histogram returns {0, 0}.
std::pair<float, float> clip_range(const Histogram& h, Algorithm algo, const QuantSpec& spec,
                                   const AlgorithmOptions& opts = {}, Algorithm* chosen = nullptr);

/// Expected squared quantization error of the values in `h` (bin centres, with
/// the uniform within-bin spread ignored) when quantized with the qparams of the
/// range [lo, hi] under `spec`; divided by the total count.
double quantization_mse(const Histogram& h, float lo, float hi, const QuantSpec& spec);

}  // namespace qfx::quant
