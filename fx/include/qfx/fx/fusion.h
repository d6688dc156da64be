// Float conv + batch-norm folding for inference, as torch.nn.utils.fusion and
// torch.fx.experimental.optimization.fuse.
#pragma once

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include <utility>

#include "qfx/fx/graph_module.h"

namespace qfx::fx {

/// Folds batch-norm statistics into convolution weights
/// (torch.nn.utils.fusion.fuse_conv_bn_weights), for inference:
///   k = bn_w / sqrt(bn_rv + bn_eps),  w' = w * k,  b' = (b - bn_rm) * k + bn_b.
/// `conv_w` is [C_out, C_in/groups, k...] ([C_in, C_out/groups, k...] when
/// `transpose`); `conv_b`, `bn_w` and `bn_b` may be undefined (zeros, ones,
/// zeros); the statistics are [C_out] float tensors. Returns new tensors
/// (`conv_w`'s dtype), computed without autograd. Throws ArgumentError
/// if the channel counts disagree (a grouped transposed convolution, whose
/// weight holds C_out/groups channels, is one such case).
std::pair<at::Tensor, at::Tensor> fuse_conv_bn_weights(const at::Tensor& conv_w, const at::Tensor& conv_b,
                                                       const at::Tensor& bn_rm, const at::Tensor& bn_rv, double bn_eps,
                                                       const at::Tensor& bn_w, const at::Tensor& bn_b,
                                                       bool transpose = false);

/// A new convolution equal, in eval mode, to `bn(conv(x))`
/// (torch.nn.utils.fusion.fuse_conv_bn_eval): same hyper-parameters, a bias
/// always, weights from `fuse_conv_bn_weights`. The inputs are left as they are.
/// Throws ArgumentError if either module is in training mode, and
/// ArgumentError if the batch norm tracks no running statistics or its
/// channel count is not the convolution's output channel count.
torch::nn::Conv1d fuse_conv_bn_eval(const torch::nn::Conv1d& conv, const torch::nn::BatchNorm1d& bn);
torch::nn::Conv2d fuse_conv_bn_eval(const torch::nn::Conv2d& conv, const torch::nn::BatchNorm2d& bn);
torch::nn::Conv3d fuse_conv_bn_eval(const torch::nn::Conv3d& conv, const torch::nn::BatchNorm3d& bn);

/// Folds every Conv1d/2d/3d -> BatchNorm1d/2d/3d chain of `gm` into one
/// convolution (torch.fx.experimental.optimization.fuse): chains are found by
/// `match_module_pattern` (the convolution's only user is the batch norm, which
/// reads nothing else); the convolution's module is replaced by the folded copy
/// (so modules shared with other models are not changed; a convolution module
/// that two nodes call is left alone), the batch-norm node
/// and module are removed, and the graph is linted. A chain whose batch norm is
/// in training mode or has no running statistics is left alone. Returns the
/// number of chains folded. The result equals the unfused model in eval mode up
/// to float rounding (about 1e-6 relative).
int fuse_conv_bn(GraphModule& gm);

}  // namespace qfx::fx
