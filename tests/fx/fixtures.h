// Test helpers: the exported TorchScript fixtures and their recorded inputs/outputs.
#pragma once

#include <torch/serialize.h>

#include <fstream>
#include <string>
#include <vector>

namespace qfx::test {

inline std::string fixture(const std::string& name) { return std::string(QFX_FIXTURE_DIR) + "/" + name; }

/// Reads a list of tensors written by Python's torch.save(list_of_tensors, path).
inline std::vector<c10::IValue> load_tensor_list(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  c10::IValue v = torch::pickle_load(bytes);
  std::vector<c10::IValue> out;
  for (const auto& e : v.toListRef()) out.push_back(e);
  return out;
}

/// Max |a-b| / max(|b|, tiny): relative error of `a` against reference `b`.
inline double rel_error(const at::Tensor& a, const at::Tensor& b) {
  auto fa = a.to(at::kDouble), fb = b.to(at::kDouble);
  const double denom = std::max(fb.abs().max().item<double>(), 1e-12);
  return (fa - fb).abs().max().item<double>() / denom;
}

}  // namespace qfx::test
