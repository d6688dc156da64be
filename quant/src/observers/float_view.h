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

}  // namespace qfx::quant::detail
