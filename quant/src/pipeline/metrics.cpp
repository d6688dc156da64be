// The output metrics evaluation reports.
#include "metrics.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

namespace qfx::quant::pipeline {

double sqnr_db(double signal, double noise) { return 10.0 * std::log10(std::max(signal, 1e-30) / std::max(noise, 1e-30)); }

double cosine(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kDouble).flatten(), y = b.to(at::kDouble).flatten();
  const double nx = x.norm().item<double>(), ny = y.norm().item<double>();
  if (nx == 0.0 || ny == 0.0) return nx == ny ? 1.0 : 0.0;
  return (x * y).sum().item<double>() / (nx * ny);
}

}  // namespace qfx::quant::pipeline
