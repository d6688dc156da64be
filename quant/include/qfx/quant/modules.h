// Fused and QAT modules: conv / linear with optional batch norm and ReLU / ReLU6,
// with a weight fake quantize (torch.ao.nn.intrinsic(.qat): ConvBnReLU2d,
// ConvReLU2d, LinearReLU, ...; torch.ao.nn.qat: Conv2d, Linear).
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/op_catalog.h"  // FusedActivation

namespace qfx::quant {

/// `y` after the fused activation `a`: relu, hardtanh(0, 6) for ReLU6, or `y` itself.
at::Tensor apply_activation(const at::Tensor& y, FusedActivation a);

/// One weighted op (Conv1d/2d/3d, ConvTranspose2d or Linear) with what was fused
/// into it. Its parameters are the *same tensors* as the original module's
/// (`weight`, `bias`), so training it trains the user's model; with a folded batch
/// norm they are new tensors (eval-mode fusion never changes the user's tensors).
///
/// forward(x): x is [N, C_in, ...spatial] (conv) or [..., in_features] (linear):
/// - plain:  act(op(x, wfq(W), b))
/// - with batch norm (QAT, torch.ao's ConvBn "approximate" form, Jacob et al. 2018):
///   s = gamma / sqrt(running_var + eps); y = op(x, wfq(W * s), 0) / s + b; act(bn(y)).
///   In train mode bn uses batch statistics and updates its running statistics,
///   unless `freeze_bn_stats()` was called.
/// `wfq` is `weight_fake_quant` when set (PTQ: observes; QAT: fake-quantizes).
class FusedConvLinear : public torch::nn::Module {
 public:
  enum class Op { kConv, kConvTranspose, kLinear };

  /// How a batch norm that follows the op is treated.
  enum class BnMode {
    kFold,      ///< eval-mode fusion: folded into new weight and bias tensors,
                ///< W' = W * gamma / sqrt(var + eps) per output channel,
                ///< b' = (b - mean) * gamma / sqrt(var + eps) + beta
    kSimulate,  ///< QAT: kept (submodule "bn", tensors shared with the user's module)
                ///< and folding simulated in forward
  };
  /// Builds from a libtorch Conv1d/2d/3d, ConvTranspose2d or Linear module `op`,
  /// optionally with the BatchNorm1d/2d/3d `bn` that follows it and an activation.
  /// Returns nullptr with the reason in `why` for what it cannot express
  /// (non-zero padding modes, padding='same' with an even effective kernel, a batch
  /// norm without running statistics or with another channel count, a grouped
  /// transposed conv with batch norm).
  static std::shared_ptr<FusedConvLinear> create(const std::shared_ptr<torch::nn::Module>& op,
                                                 const std::shared_ptr<torch::nn::Module>& bn, BnMode mode,
                                                 FusedActivation act, std::string* why);
  /// The post-activation.
  FusedActivation activation() const { return act_; }
  /// Sets the weight fake quantize (registered as "weight_fake_quant").
  void set_weight_fake_quant(std::shared_ptr<FakeQuantize> fq);
  FakeQuantize* weight_fake_quant() const { return wfq_.get(); }

  at::Tensor forward(const at::Tensor& x);

  /// QAT schedule (torch.ao's names): stop updating / resume updating the batch
  /// norm's running statistics (frozen: the bn runs in eval mode even in train()).
  void freeze_bn_stats();
  void update_bn_stats();
  bool bn_frozen() const { return bn_frozen_; }
  void train(bool on = true) override;

  /// The weight and bias as deployed: batch norm folded from running statistics
  /// (what convert quantizes). weight: the op's layout ([C_out, C_in/g, k...] conv,
  /// [C_in, C_out/g, k...] transposed, [out, in] linear); bias [C_out] (zeros if none).
  std::pair<at::Tensor, at::Tensor> folded_weight_bias() const;

  Op op() const { return op_; }
  /// torch.ao-style class name: "ConvBnReLU2d", "ConvReLU2d", "LinearReLU", "Conv2d", ...
  std::string type_name() const;
  /// The original op's canonical name ("conv2d", "linear", ...).
  const std::string& base_op() const { return base_op_; }
  /// Conv hyper-parameters (empty for linear).
  const std::vector<int64_t>& stride() const { return stride_; }
  const std::vector<int64_t>& padding() const { return padding_; }
  const std::vector<int64_t>& dilation() const { return dilation_; }
  const std::vector<int64_t>& output_padding() const { return output_padding_; }
  int64_t groups() const { return groups_; }
  /// Output-channel axis of the weight (0, or 1 for transposed conv).
  int64_t weight_out_axis() const { return op_ == Op::kConvTranspose ? 1 : 0; }
  /// Number of output channels.
  int64_t out_channels() const;
  /// True if a batch norm is attached (QAT) or was folded in.
  bool has_bn() const { return bn_ != nullptr || bn_folded_; }
  /// True if a batch norm is attached and simulated in forward (QAT form).
  bool bn_simulated() const { return bn_ != nullptr; }
  /// The weight (the op's layout) and bias ([C_out]; undefined if none) parameters.
  const at::Tensor& weight() const { return weight_; }
  const at::Tensor& bias() const { return bias_; }
  /// Gives this module its own copies of its weight and bias (clones, same
  /// requires_grad): afterwards changing them leaves the module they came from
  /// (the user's model) untouched. The PTQ algorithms call it before changing
  /// weights in place. No-op once done.
  void unshare_parameters();
  /// Gives a module without bias one: registers `b` ([C_out] float) as parameter
  /// "bias" (bias correction needs it). Throws ArgumentError if a bias exists
  /// or with a simulated batch norm.
  void add_bias(const at::Tensor& b);
  /// op(x, w, b) without the activation (and without fake quantization or a
  /// simulated batch norm): the pre-activation output for weight `w` and bias
  /// `b` ([C_out] or undefined).
  at::Tensor preactivation(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const {
    return raw_op(x, w, b);
  }

  /// For qfx::fx::save_graph_module: the hyper-parameters (op, weight shape,
  /// conv settings, activation, batch-norm mode) and the records of the batch
  /// norm and weight fake quantize submodules; no tensor values.
  c10::IValue config() const;
  /// Rebuilds a module from `config()` with placeholder tensors of the right
  /// names and shapes (the loader then sets their values). Throws
  /// qfx::IoError for a malformed configuration.
  static std::shared_ptr<FusedConvLinear> from_config(const c10::IValue& config);

 private:
  FusedConvLinear() : torch::nn::Module("FusedConvLinear") {}
  at::Tensor raw_op(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const;
  bool read_op(const std::shared_ptr<torch::nn::Module>& m, std::string* why);
  bool read_bn(const std::shared_ptr<torch::nn::Module>& bn, std::string* why);
  /// `v` ([C]) shaped to broadcast along `axis` of a rank-`rank` tensor.
  static at::Tensor channel_view(const at::Tensor& v, int64_t rank, int64_t axis);

  Op op_ = Op::kConv;
  std::string base_op_;
  int dims_ = 2;
  std::vector<int64_t> stride_, padding_, dilation_, output_padding_;
  int64_t groups_ = 1;
  at::Tensor weight_, bias_;
  std::shared_ptr<torch::nn::Module> bn_;
  std::function<at::Tensor(const at::Tensor&)> bn_forward_;
  at::Tensor bn_weight_, bn_bias_, bn_mean_, bn_var_;
  double bn_eps_ = 1e-5;
  bool bn_folded_ = false;
  bool bn_frozen_ = false;
  bool own_parameters_ = false;
  FusedActivation act_ = FusedActivation::kNone;
  std::shared_ptr<FakeQuantize> wfq_;
};

/// The callable a GraphModule binds for a FusedConvLinear at a call_module node.
fx::CallFn fused_call_fn(const std::shared_ptr<FusedConvLinear>& m);

/// QAT schedule over a whole model: `freeze_bn_stats` / `update_bn_stats` on every
/// FusedConvLinear inside `model`.
void freeze_bn_stats(torch::nn::Module& model);
void update_bn_stats(torch::nn::Module& model);

}  // namespace qfx::quant
