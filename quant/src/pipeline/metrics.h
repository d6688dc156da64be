// Internal: the output metrics evaluation reports.
#pragma once

#include <ATen/core/Tensor.h>

namespace qfx::quant::pipeline {

/// 10 log10(signal / noise), both sums of squares (floored at 1e-30).
double sqnr_db(double signal, double noise);
/// Cosine similarity of two tensors of the same size, flattened, in double (float32
/// sums of squares overflow beyond 1e19). An all-zero side has no direction: 1 when
/// both are zero, else 0.
double cosine(const at::Tensor& a, const at::Tensor& b);

}  // namespace qfx::quant::pipeline
