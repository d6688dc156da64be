// Test helpers: the exported TorchScript fixtures and their recorded inputs/outputs.
#pragma once

#include <torch/csrc/jit/serialization/import.h>
#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace qfx::test {

inline std::string fixture(const std::string& name) { return std::string(QFX_FIXTURE_DIR) + "/" + name; }

/// Reads the tensors export_models.py saved as buffers t0..tN of a TorchScript module.
inline std::vector<c10::IValue> load_tensor_list(const std::string& path) {
  auto m = torch::jit::load(path);
  std::vector<c10::IValue> out;
  for (size_t i = 0; m.hasattr("t" + std::to_string(i)); ++i) out.push_back(m.attr("t" + std::to_string(i)));
  return out;
}

/// Max |a-b| / max(|b|, tiny): relative error of `a` against reference `b`.
inline double rel_error(const at::Tensor& a, const at::Tensor& b) {
  auto fa = a.to(at::kDouble), fb = b.to(at::kDouble);
  const double denom = std::max(fb.abs().max().item<double>(), 1e-12);
  return (fa - fb).abs().max().item<double>() / denom;
}

/// Cosine similarity of two tensors seen as flat vectors.
inline double cosine(const at::Tensor& a, const at::Tensor& b) {
  return (a.flatten() * b.flatten()).sum().item<double>() / (a.norm().item<double>() * b.norm().item<double>() + 1e-30);
}

}  // namespace qfx::test
