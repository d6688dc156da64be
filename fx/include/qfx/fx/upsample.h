// torch.nn.Upsample as a native libtorch module: what the TorchScript tracer and
// the torch.export reader build for it, and what the ONNX exporter reads.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/options/upsampling.h>

#include <string>
#include <vector>

namespace qfx::fx {

/// torch.nn.Upsample: interpolates x [N, C, ...spatial] to `sizes` or by
/// `scales` (one value applies to every spatial dim, since the rank is only
/// known at run time), as torch.nn.functional.interpolate. `mode`: nearest,
/// linear, bilinear, bicubic, trilinear; `align` as align_corners (unset: PyTorch's
/// default). Throws ArgumentError for an unknown mode or not exactly one of
/// `sizes` and `scales`.
class UpsampleLeaf : public torch::nn::Module {
 public:
  UpsampleLeaf(std::vector<int64_t> sizes, std::vector<double> scales, std::string mode, c10::optional<bool> align);
  at::Tensor forward(const at::Tensor& x);
  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::vector<double>& scales() const { return scales_; }
  const std::string& mode() const { return mode_; }
  c10::optional<bool> align_corners() const { return align_; }

 private:
  std::vector<int64_t> sizes_;
  std::vector<double> scales_;
  std::string mode_;
  torch::nn::functional::InterpolateFuncOptions::mode_t interp_mode_;  // mode_, resolved once
  c10::optional<bool> align_;
};

}  // namespace qfx::fx
