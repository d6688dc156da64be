// Float conv + batch-norm folding (see fusion.h).
#include "qfx/fx/fusion.h"

#include <stdexcept>
#include <string>

#include "qfx/fx/module_matcher.h"
#include "qfx/error.h"

namespace qfx::fx {

std::pair<at::Tensor, at::Tensor> fuse_conv_bn_weights(const at::Tensor& conv_w, const at::Tensor& conv_b,
                                                       const at::Tensor& bn_rm, const at::Tensor& bn_rv, double bn_eps,
                                                       const at::Tensor& bn_w, const at::Tensor& bn_b, bool transpose) {
  at::NoGradGuard ng;
  const int64_t out_dim = transpose ? 1 : 0;
  if (conv_w.dim() < 3)
    throw ArgumentError("fuse_conv_bn_weights: the convolution weight has rank " + std::to_string(conv_w.dim()) +
                                ", expected 3 or more");
  const int64_t c_out = bn_rm.numel();
  if (bn_rv.numel() != c_out || (bn_w.defined() && bn_w.numel() != c_out) || (bn_b.defined() && bn_b.numel() != c_out) ||
      (conv_b.defined() && conv_b.numel() != c_out))
    throw ArgumentError("fuse_conv_bn_weights: the bias and batch-norm tensors have different channel counts");
  if (conv_w.size(out_dim) != c_out)
    throw ArgumentError("fuse_conv_bn_weights: the convolution weight has " + std::to_string(conv_w.size(out_dim)) +
                                " output channels in dimension " + std::to_string(out_dim) + ", the batch norm " +
                                std::to_string(c_out));
  const at::Tensor w = bn_w.defined() ? bn_w : at::ones_like(bn_rm);
  const at::Tensor b = bn_b.defined() ? bn_b : at::zeros_like(bn_rm);
  const at::Tensor cb = conv_b.defined() ? conv_b : at::zeros_like(bn_rm);
  const at::Tensor k = w * at::rsqrt(bn_rv + bn_eps);
  std::vector<int64_t> shape(static_cast<size_t>(conv_w.dim()), 1);
  shape[static_cast<size_t>(out_dim)] = -1;
  const at::Tensor fused_w = (conv_w * k.reshape(shape)).to(conv_w.scalar_type());
  const at::Tensor fused_b = ((cb - bn_rm) * k + b).to(conv_w.scalar_type());
  return {fused_w, fused_b};
}

namespace {

template <typename ConvImpl, typename BnImpl>
void check_eval(const ConvImpl& conv, const BnImpl& bn) {
  if (conv.is_training() || bn.is_training())
    throw ArgumentError("fuse_conv_bn_eval: only for eval mode (call eval() on both modules first)");
  if (!bn.running_mean.defined() || !bn.running_var.defined())
    throw ArgumentError("fuse_conv_bn_eval: the batch norm tracks no running statistics");
}

template <typename Conv, typename Options, typename Bn>
Conv fold(const Conv& conv, const Bn& bn) {
  check_eval(*conv, *bn);
  const auto& o = conv->options;
  Conv fused(Options(o.in_channels(), o.out_channels(), o.kernel_size())
                 .stride(o.stride())
                 .padding(o.padding())
                 .dilation(o.dilation())
                 .groups(o.groups())
                 .bias(true)
                 .padding_mode(o.padding_mode()));
  auto [w, b] = fuse_conv_bn_weights(conv->weight, conv->bias, bn->running_mean, bn->running_var, bn->options.eps(),
                                     bn->weight, bn->bias);
  at::NoGradGuard ng;
  fused->weight.set_data(w);
  fused->bias.set_data(b);
  fused->to(conv->weight.device());
  return fused;
}

template <typename ConvImpl, typename BnImpl, typename Conv, typename Bn>
bool fold_chain(GraphModule& gm, Node* conv_node, Node* bn_node) {
  auto conv = std::dynamic_pointer_cast<ConvImpl>(gm.get_submodule(conv_node->target()));
  auto bn = std::dynamic_pointer_cast<BnImpl>(gm.get_submodule(bn_node->target()));
  if (!conv || !bn || bn->is_training() || !bn->running_mean.defined()) return false;
  // A convolution module called from another node too would change there as well.
  int calls = 0;
  for (Node* n : gm.graph().nodes()) calls += n->op() == Opcode::kCallModule && n->target() == conv_node->target();
  if (calls != 1) return false;
  if (bn->running_mean.numel() != conv->options.out_channels()) return false;
  const bool was_training = conv->is_training();
  conv->eval();
  Conv fused = fuse_conv_bn_eval(Conv(conv), Bn(bn));
  if (was_training) conv->train();
  gm.replace_submodule(conv_node->target(), fused.ptr(),
                       [m = fused.ptr()](std::vector<c10::IValue>& a) { return c10::IValue(m->forward(a.at(0).toTensor())); });
  bn_node->replace_all_uses_with(conv_node);
  const std::string bn_path = bn_node->target();
  gm.graph().erase_node(bn_node);
  // Another node may still call the batch norm (a shared module): keep it then.
  bool still_used = false;
  for (Node* n : gm.graph().nodes()) still_used |= n->op() == Opcode::kCallModule && n->target() == bn_path;
  if (!still_used) gm.remove_submodule(bn_path);
  return true;
}

}  // namespace

torch::nn::Conv1d fuse_conv_bn_eval(const torch::nn::Conv1d& conv, const torch::nn::BatchNorm1d& bn) {
  return fold<torch::nn::Conv1d, torch::nn::Conv1dOptions>(conv, bn);
}
torch::nn::Conv2d fuse_conv_bn_eval(const torch::nn::Conv2d& conv, const torch::nn::BatchNorm2d& bn) {
  return fold<torch::nn::Conv2d, torch::nn::Conv2dOptions>(conv, bn);
}
torch::nn::Conv3d fuse_conv_bn_eval(const torch::nn::Conv3d& conv, const torch::nn::BatchNorm3d& bn) {
  return fold<torch::nn::Conv3d, torch::nn::Conv3dOptions>(conv, bn);
}

int fuse_conv_bn(GraphModule& gm) {
  int fused = 0;
  for (const auto& c : match_module_pattern(gm, {"Conv1d", "BatchNorm1d"}))
    fused += fold_chain<torch::nn::Conv1dImpl, torch::nn::BatchNorm1dImpl, torch::nn::Conv1d, torch::nn::BatchNorm1d>(gm, c[0], c[1]);
  for (const auto& c : match_module_pattern(gm, {"Conv2d", "BatchNorm2d"}))
    fused += fold_chain<torch::nn::Conv2dImpl, torch::nn::BatchNorm2dImpl, torch::nn::Conv2d, torch::nn::BatchNorm2d>(gm, c[0], c[1]);
  for (const auto& c : match_module_pattern(gm, {"Conv3d", "BatchNorm3d"}))
    fused += fold_chain<torch::nn::Conv3dImpl, torch::nn::BatchNorm3dImpl, torch::nn::Conv3d, torch::nn::BatchNorm3d>(gm, c[0], c[1]);
  gm.graph().lint();
  return fused;
}

}  // namespace qfx::fx
