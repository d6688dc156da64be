// The output metrics evaluation reports.
#include "metrics.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "qfx/error.h"

namespace qfx::quant::pipeline {

double sqnr_db(double signal, double noise) { return 10.0 * std::log10(std::max(signal, 1e-30) / std::max(noise, 1e-30)); }

double cosine(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kDouble).flatten(), y = b.to(at::kDouble).flatten();
  const double nx = x.norm().item<double>(), ny = y.norm().item<double>();
  if (nx == 0.0 || ny == 0.0) return nx == ny ? 1.0 : 0.0;
  return (x * y).sum().item<double>() / (nx * ny);
}

at::Tensor labelled(const at::Tensor& labels, int64_t classes) { return labels.ge(0).logical_and(labels.lt(classes)); }

void check_class_labels(const at::Tensor& labels, int64_t classes, const std::string& labels_file) {
  const at::Tensor bad = labelled(labels, classes).logical_not().nonzero();
  if (bad.numel() == 0) return;
  const int64_t i = bad[0][0].item<int64_t>();
  throw DataError(labels_file + ": sample " + std::to_string(i) + " has label " + std::to_string(labels[i].item<int64_t>()) +
                  ", outside the model's " + std::to_string(classes) + " classes [0, " + std::to_string(classes) + ") (" +
                  std::to_string(bad.size(0)) + " of " + std::to_string(labels.numel()) +
                  " labels are; one class index per sample is needed)");
}

LabelHits label_hits(const at::Tensor& pred, const at::Tensor& labels, int64_t classes, const std::string& labels_file) {
  if (pred.sizes() != labels.sizes())
    throw DataError(labels_file + ": labels " + c10::str(labels.sizes()) + " do not match the model's predictions " +
                    c10::str(pred.sizes()));
  if (labels.dim() == 1) check_class_labels(labels, classes, labels_file);
  const at::Tensor valid = labelled(labels, classes);
  return {pred.eq(labels).logical_and(valid).sum().item<int64_t>(), valid.sum().item<int64_t>()};
}

double label_accuracy(const at::Tensor& pred, const at::Tensor& labels, int64_t classes, const std::string& labels_file) {
  const LabelHits h = label_hits(pred, labels, classes, labels_file);
  return static_cast<double>(h.right) / static_cast<double>(std::max<int64_t>(h.labelled, 1));
}

}  // namespace qfx::quant::pipeline
