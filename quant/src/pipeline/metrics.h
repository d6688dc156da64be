// Internal: the output metrics evaluation reports.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace qfx::quant::pipeline {

/// 10 log10(signal / noise), both sums of squares (floored at 1e-30).
double sqnr_db(double signal, double noise);
/// Cosine similarity of two tensors of the same size, flattened, in double (float32
/// sums of squares overflow beyond 1e19). An all-zero side has no direction: 1 when
/// both are zero, else 0.
double cosine(const at::Tensor& a, const at::Tensor& b);
/// The fraction of predicted classes `pred` ([N], or per pixel [N, H, W]) equal to
/// `labels` (the same shape), over the labels in [0, classes) (others, such as 255 on
/// VOC's borders, are left out). Throws DataError naming `labels_file` when the shapes differ.
double label_accuracy(const at::Tensor& pred, const at::Tensor& labels, int64_t classes, const std::string& labels_file);

}  // namespace qfx::quant::pipeline
