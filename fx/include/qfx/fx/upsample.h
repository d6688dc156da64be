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
  /// x [N, C, ...spatial] float -> [N, C, ...sizes] (or spatial x scales, floored).
  at::Tensor forward(const at::Tensor& x);
  /// Output spatial sizes (one value: every spatial dim); empty when scales are given.
  const std::vector<int64_t>& sizes() const { return sizes_; }
  /// Scale factors per spatial dim (one value: every dim); empty when sizes are given.
  const std::vector<double>& scales() const { return scales_; }
  /// "nearest", "linear", "bilinear", "bicubic" or "trilinear".
  const std::string& mode() const { return mode_; }
  /// align_corners as given (unset: PyTorch's default, false for the linear modes).
  c10::optional<bool> align_corners() const { return align_; }

 private:
  std::vector<int64_t> sizes_;
  std::vector<double> scales_;
  std::string mode_;
  torch::nn::functional::InterpolateFuncOptions::mode_t interp_mode_;  // mode_, resolved once
  c10::optional<bool> align_;
};

}  // namespace qfx::fx
