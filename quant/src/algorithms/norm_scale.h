// Internal: a LayerNorm's affine parameters, found in a graph and divided by a
// per-channel scale (SmoothQuant and AWQ fold 1/s into the norm before linears).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/normalization.h>

#include <memory>
#include <optional>
#include <string>

#include "qfx/fx/graph_module.h"

namespace qfx::quant::detail {

/// The affine parameters of one LayerNorm node.
struct NormParams {
  fx::Node* node = nullptr;
  std::shared_ptr<torch::nn::LayerNormImpl> module;  ///< call_module form
  std::string weight_attr, bias_attr;                 ///< aten::layer_norm form (get_attr targets)
};

/// `n` as a LayerNorm with weight and bias of its own (a torch.nn.LayerNorm module
/// with elementwise_affine, or aten::layer_norm whose weight and bias are get_attr
/// nodes read by no other node); nullopt otherwise.
std::optional<NormParams> as_norm(fx::GraphModule& gm, fx::Node* n);

/// Divides the norm's weight and bias by `s` ([C], the normalised shape), on
/// copies: the user's tensors stay (aten::layer_norm's copies are named after the
/// originals with `suffix`).
void scale_norm(fx::GraphModule& gm, NormParams& norm, const at::Tensor& s, const std::string& suffix);

}  // namespace qfx::quant::detail
