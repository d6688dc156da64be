// The modules of a converted model (convert_fx's output), in torch.ao's
// "reference quantized model" form: every quantized value passes through a
// QuantDequant with frozen qparams, and every quantized conv / linear holds its
// int8 weight codes and runs on their dequantized values, so the converted model
// runs in plain libtorch (for evaluation inside a training framework) and
// export_onnx writes it as the QDQ model one to one.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/qparams.h"

namespace qfx::quant {

/// The integer codes of a weight `w` (float) under qparams `q` (per-channel along
/// `axis` when `q.per_channel`): ONNX QuantizeLinear's clamp(round_half_even(w /
/// scale) + zero_point, quant_min, quant_max), as uint8 for u8 and int8 otherwise.
at::Tensor quantize_weight_codes(const at::Tensor& w, const QParams& q, int64_t axis);

/// QuantizeLinear -> DequantizeLinear with frozen qparams (torch.ao reference
/// models' quantize_per_tensor / dequantize pair; ONNX QuantizeLinear-13 and
/// DequantizeLinear-13 semantics): q = clamp(round_half_even(x / scale) + zp,
/// quant_min, quant_max); y = (q - zp) * scale, in float32.
///
/// forward(x): x float32 of any shape; per-channel qparams apply along `axis`
/// (which must be < x.dim(); DataError otherwise). Returns a float32 tensor of x's shape. No gradient
/// flows through the rounding (this is an inference module; train with
/// FakeQuantize).
class QuantDequant : public torch::nn::Module {
 public:
  /// Freezes `q` (scale float32 0-dim or [C], zero_point integer of the same
  /// shape). `algorithm` and the observed range are carried to encodings.json.
  QuantDequant(const QParams& q, std::string algorithm, float observed_min, float observed_max);
  /// Quantizes then dequantizes `x` (see the class comment); float32, x's shape.
  at::Tensor forward(const at::Tensor& x) const;
  /// The frozen qparams (scale float32, zero_point int32; buffers "scale" and "zero_point").
  const QParams& qparams() const { return q_; }
  /// How the range was chosen ("minmax", "entropy", "fixed", ...).
  const std::string& algorithm() const { return algorithm_; }
  /// The range the observer saw (0, 0 if it saw nothing).
  float observed_min() const { return observed_min_; }
  float observed_max() const { return observed_max_; }

 private:
  QParams q_;
  std::string algorithm_;
  float observed_min_, observed_max_;
};

/// A deployed Conv1d/2d/3d, ConvTranspose2d or Linear with its fused activation:
/// batch norm folded, weight stored as integer codes with their qparams (or kept
/// float when the op was not quantized), and, when the input scale is known
/// (the input comes from a per-tensor QuantDequant), the bias stored as int32
/// codes with scale = input scale x weight scale (ONNX QLinearConv's bias).
///
/// forward(x): x float32 [N, C_in, ...spatial] (conv) or [..., in_features]
/// (linear); returns act(op(x, dequant(W_q), dequant(b_q))).
class QuantizedConvLinear : public torch::nn::Module {
 public:
  /// Built by convert_fx from a prepared FusedConvLinear: its folded weight is
  /// quantized with the weight FakeQuantize's qparams when `quantize_weight` and
  /// it has one (otherwise the weight stays float: the float model calibration
  /// runs); `input_scale` > 0 also quantizes the bias to int32 (saturating).
  QuantizedConvLinear(const FusedConvLinear& f, bool quantize_weight, float input_scale);
  /// act(op(x, weight(), bias)) in float32 (see the class comment).
  at::Tensor forward(const at::Tensor& x) const;

  /// Conv, transposed conv or linear.
  FusedConvLinear::Op op() const { return op_; }
  /// The fused post-activation.
  FusedActivation activation() const { return act_; }
  /// True if the weight is stored as integer codes.
  bool weight_quantized() const { return weight_q_.defined() && weight_q_.scalar_type() != at::kFloat; }
  /// Weight codes (s8 or u8, the op's layout) when quantized, else the float weight.
  const at::Tensor& weight_codes() const { return weight_q_; }
  /// Weight qparams (meaningful when weight_quantized()); per-channel along
  /// `weight_out_axis()` (0, or 1 for transposed conv).
  const QParams& weight_qparams() const { return wq_; }
  int64_t weight_out_axis() const { return op_ == FusedConvLinear::Op::kConvTranspose ? 1 : 0; }
  /// int32 bias codes [C_out] and their float32 scales [C_out], or undefined when
  /// the bias stays float.
  const at::Tensor& bias_codes() const { return bias_q_; }
  const at::Tensor& bias_scale() const { return bias_scale_; }
  /// The float bias [C_out] (batch norm folded; zeros if the op had none).
  const at::Tensor& bias_float() const { return bias_; }
  /// The dequantized weight (or the float weight).
  at::Tensor weight() const;
  /// Conv hyper-parameters (empty for linear).
  const std::vector<int64_t>& stride() const { return stride_; }
  const std::vector<int64_t>& padding() const { return padding_; }
  const std::vector<int64_t>& dilation() const { return dilation_; }
  const std::vector<int64_t>& output_padding() const { return output_padding_; }
  int64_t groups() const { return groups_; }
  /// torch.ao-style name of what it came from ("ConvReLU2d", "Linear", ...).
  const std::string& type_name() const { return type_name_; }

  /// For qfx::fx::save_graph_module: hyper-parameters and which tensors exist
  /// (weight codes or float weight, int32 bias), no tensor values.
  c10::IValue config() const;
  /// Rebuilds a module from `config()` with placeholder tensors of the right
  /// names and dtypes (the loader then sets their values).
  static std::shared_ptr<QuantizedConvLinear> from_config(const c10::IValue& config);

 private:
  QuantizedConvLinear() : torch::nn::Module("QuantizedConvLinear") {}
  FusedConvLinear::Op op_;
  FusedActivation act_;
  std::string type_name_;
  std::vector<int64_t> stride_, padding_, dilation_, output_padding_;
  int64_t groups_ = 1;
  at::Tensor weight_q_, bias_, bias_q_, bias_scale_;
  QParams wq_;
};

/// The callables a GraphModule binds for these modules at call_module nodes.
fx::CallFn quant_dequant_call_fn(const std::shared_ptr<QuantDequant>& m);
fx::CallFn quantized_call_fn(const std::shared_ptr<QuantizedConvLinear>& m);

}  // namespace qfx::quant
