#include "qfx/quant/quantized_modules.h"

#include <ATen/ATen.h>

#include <limits>

#include "qfx/error.h"

namespace qfx::quant {
namespace {

// `v` ([C] or 0-dim) shaped to broadcast along `axis` of a rank-`rank` tensor.
at::Tensor along(const at::Tensor& v, int64_t rank, int64_t axis) {
  if (v.dim() == 0) return v;
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = -1;
  return v.reshape(shape);
}

// QuantizeLinear's codes as float: clamp(round_half_even(x / scale) + zp, quant_min,
// quant_max), per-channel qparams along `axis` (at::round rounds half to even).
at::Tensor quantize_codes(const at::Tensor& x, const QParams& q, int64_t axis) {
  const at::Tensor s = along(q.scale, x.dim(), axis), z = along(q.zero_point.to(at::kFloat), x.dim(), axis);
  return at::clamp(at::round(x / s) + z, static_cast<double>(q.quant_min), static_cast<double>(q.quant_max));
}

// DequantizeLinear of (float or integer) codes: (codes - zp) * scale along `axis`.
at::Tensor dequantize_codes(const at::Tensor& codes, const QParams& q, int64_t axis) {
  return (codes.to(at::kFloat) - along(q.zero_point.to(at::kFloat), codes.dim(), axis)) * along(q.scale, codes.dim(), axis);
}

}  // namespace

QuantDequant::QuantDequant(const QParams& q, std::string algorithm, float observed_min, float observed_max)
    : torch::nn::Module("QuantDequant"),
      q_(q),
      algorithm_(std::move(algorithm)),
      observed_min_(observed_min),
      observed_max_(observed_max) {
  q_.scale = register_buffer("scale", q.scale.detach().to(at::kFloat).clone());
  q_.zero_point = register_buffer("zero_point", q.zero_point.detach().to(at::kInt).clone());
}

at::Tensor QuantDequant::forward(const at::Tensor& x) const {
  at::NoGradGuard ng;
  const int64_t axis = q_.per_channel ? q_.axis : 0;
  if (q_.per_channel && axis >= x.dim())
    throw DataError("QuantDequant: per-channel axis " + std::to_string(axis) + " on a rank-" +
                                std::to_string(x.dim()) + " tensor");
  return dequantize_codes(quantize_codes(x, q_, axis), q_, axis);
}

QuantizedConvLinear::QuantizedConvLinear(const FusedConvLinear& f, bool quantize_weight, float input_scale)
    : torch::nn::Module("QuantizedConvLinear"),
      op_(f.op()),
      act_(f.activation()),
      type_name_(f.type_name()),
      stride_(f.stride()),
      padding_(f.padding()),
      dilation_(f.dilation()),
      output_padding_(f.output_padding()),
      groups_(f.groups()) {
  at::NoGradGuard ng;
  auto [w, b] = f.folded_weight_bias();
  bias_ = register_buffer("bias", b.detach().clone());
  FakeQuantize* wfq = quantize_weight ? f.weight_fake_quant() : nullptr;
  if (!wfq) {
    weight_q_ = register_buffer("weight", w.detach().clone());
    return;
  }
  wq_ = wfq->qparams();
  wq_.scale = register_buffer("weight_scale", wq_.scale.detach().to(at::kFloat).clone());
  wq_.zero_point = register_buffer("weight_zero_point", wq_.zero_point.detach().to(at::kInt).clone());
  wq_.axis = weight_out_axis();
  const at::Tensor codes = quantize_codes(w, wq_, wq_.axis);
  weight_q_ = register_buffer("weight_q", wq_.dtype == QDType::kUInt8 ? codes.to(at::kByte) : codes.to(at::kChar));
  if (input_scale > 0) {
    const at::Tensor bs = (wq_.scale * input_scale).reshape({-1}).expand({b.numel()}).contiguous();
    // Saturate to int32: a float beyond its range has no defined conversion.
    const double lim = static_cast<double>(std::numeric_limits<int32_t>::max()) - 128.0;
    bias_q_ = register_buffer("bias_q", at::clamp(at::round(b / bs), -lim, lim).to(at::kInt));
    bias_scale_ = register_buffer("bias_scale", bs);
  }
}

at::Tensor QuantizedConvLinear::weight() const {
  return weight_quantized() ? dequantize_codes(weight_q_, wq_, wq_.axis) : weight_q_;
}

at::Tensor QuantizedConvLinear::forward(const at::Tensor& x) const {
  at::NoGradGuard ng;
  const at::Tensor w = weight();
  const at::Tensor b = bias_q_.defined() ? bias_q_.to(at::kFloat) * bias_scale_ : bias_;
  const at::Tensor y = op_ == FusedConvLinear::Op::kLinear
                           ? at::linear(x, w, b)
                           : at::convolution(x, w, b, stride_, padding_, dilation_,
                                             op_ == FusedConvLinear::Op::kConvTranspose, output_padding_, groups_);
  return apply_activation(y, act_);
}

fx::CallFn quant_dequant_call_fn(const std::shared_ptr<QuantDequant>& m) {
  return [m](std::vector<c10::IValue>& a) -> c10::IValue { return m->forward(a.at(0).toTensor()); };
}

fx::CallFn quantized_call_fn(const std::shared_ptr<QuantizedConvLinear>& m) {
  return [m](std::vector<c10::IValue>& a) -> c10::IValue { return m->forward(a.at(0).toTensor()); };
}

}  // namespace qfx::quant
