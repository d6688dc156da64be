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
/// Where int64 `labels` (any shape) name a class in [0, classes): a bool tensor of the
/// same shape. Other values (255 on VOC's borders) mark samples or pixels without a label.
at::Tensor labelled(const at::Tensor& labels, int64_t classes);
/// Predicted classes `pred` ([N], or per pixel [N, H, W]) against `labels` (the same
/// shape), over the labelled entries (`labelled`).
struct LabelHits {
  int64_t right = 0;     ///< labelled entries whose prediction equals the label
  int64_t labelled = 0;  ///< entries with a label in [0, classes)
};
/// Checks one class per sample: int64 `labels` [N] all in [0, classes). Throws
/// DataError naming `labels_file`, the first sample outside, its label and how many
/// are outside (a label of 1,000,000 or -5 would otherwise count as a wrong answer).
void check_class_labels(const at::Tensor& labels, int64_t classes, const std::string& labels_file);
/// Counts LabelHits. Throws DataError naming `labels_file` when the shapes differ, or
/// for labels [N] (one class per sample) outside [0, classes) (check_class_labels);
/// per-pixel labels outside it (255 on VOC's borders) are pixels without a label.
LabelHits label_hits(const at::Tensor& pred, const at::Tensor& labels, int64_t classes, const std::string& labels_file);
/// right / labelled of `label_hits` (0 without labelled entries).
double label_accuracy(const at::Tensor& pred, const at::Tensor& labels, int64_t classes, const std::string& labels_file);

}  // namespace qfx::quant::pipeline
