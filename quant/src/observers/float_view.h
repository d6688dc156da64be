// A contiguous float32 ATen tensor as the statistics library's FloatView.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "qfx/stats/statistic.h"

namespace qfx::quant::detail {

/// `x` (contiguous float32, kept alive by the caller) in logical order.
inline stats::FloatView float_view(const at::Tensor& x, const std::string& name) {
  stats::FloatView v;
  v.data = x.data_ptr<float>();
  v.shape.assign(x.sizes().begin(), x.sizes().end());
  v.name = name;
  return v;
}

/// The min and max of `x` (float32, any device) reduced where it lives (at::aminmax;
/// exact on any device), into *lo / *hi. NaN propagates through the reduction, so the
/// host check on the two extremes refuses it as it refuses Inf: qfx::DataError
/// "observed tensor 'NAME' contains NaN or Inf", as the host statistics throw.
void checked_aminmax(const at::Tensor& x, const std::string& name, float* lo, float* hi);

}  // namespace qfx::quant::detail
