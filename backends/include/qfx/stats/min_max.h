// Min/max statistics without libtorch: running and moving-average ranges, per
// tensor and per channel (torch.ao's MinMaxObserver family computes the same).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qfx/stats/statistic.h"

namespace qfx::stats {

/// Min and max of the `n` values at `x` (+inf / -inf when n is 0); NaN is skipped.
/// *nonfinite is set when any value is NaN or +-Inf (exponent all ones). Runs on all
/// OpenMP threads above 65,536 values.
void min_max(const float* x, int64_t n, float* lo, float* hi, bool* nonfinite);

/// min_max, throwing qfx::DataError "observed tensor 'NAME' contains NaN or Inf"
/// when a value is not finite.
void checked_min_max(const float* x, int64_t n, const std::string& name, float* lo, float* hi);

/// Min and max of `v` per index along logical axis `axis` (negative counts from the
/// end; channels-last views are read in place). Resizes *lo / *hi to shape[axis].
/// Throws qfx::DataError naming `v.name` for an axis out of range or a value that is
/// NaN or Inf.
void channel_min_max(const FloatView& v, int64_t axis, std::vector<float>* lo, std::vector<float>* hi);

/// Folds a batch's ranges lo[i] / hi[i] into running ranges min[i] / max[i], i < n:
/// `first` copies them; otherwise c == 0 keeps the running min and max, c > 0 the
/// moving average m <- m + c * (batch - m) computed in float32 (c rounded to float),
/// as torch.ao's MovingAverage(PerChannel)MinMaxObserver.
void accumulate_range(float* min, float* max, const float* lo, const float* hi, size_t n, bool first, double c);

/// A tap's per-tensor min and max (NaN skipped, never refused) and element count.
class MinMax : public Statistic {
 public:
  void observe(const FloatView& v) override;
  float min = 0, max = 0;  ///< over every element seen (0 before any)
  int64_t count = 0;       ///< elements seen
};

/// A tap's min and max per channel (axis 1 of the logical shape; tensors of rank < 2
/// add to min / max only), besides the per-tensor ones.
class PerChannelMinMax : public MinMax {
 public:
  void observe(const FloatView& v) override;
  std::vector<float> channel_min, channel_max;  ///< [C]; empty before a tensor of rank >= 2
};

}  // namespace qfx::stats
