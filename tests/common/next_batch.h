// Test helper: a tensor's batches as a calibration NextBatch.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "qfx/quant/calibrate.h"

namespace qfx::test {

/// Batches of `x` along dim 0, `bs` at a time (the last may be short), then an empty
/// batch: what calibrate and the PTQ algorithms read.
inline quant::NextBatch batches_of(const at::Tensor& x, int64_t bs) {
  auto pos = std::make_shared<int64_t>(0);
  return [x, bs, pos]() -> std::vector<at::Tensor> {
    if (*pos >= x.size(0)) return {};
    at::Tensor b = x.slice(0, *pos, std::min(*pos + bs, x.size(0)));
    *pos += bs;
    return {b};
  };
}

}  // namespace qfx::test
