#include "qfx/quant/quantized_modules.h"

#include <ATen/ATen.h>

#include <limits>

#include "qfx/error.h"
#include "qfx/fx/serialize.h"
#include "qfx/quant/block_quant.h"
#include "../passes/conv_settings.h"

namespace qfx::quant {
namespace {

// `v` ([C] or 0-dim) shaped to broadcast along `axis` of a rank-`rank` tensor.
at::Tensor along(const at::Tensor& v, int64_t rank, int64_t axis) {
  if (v.dim() == 0) return v;
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = -1;
  return v.reshape(shape);
}

// The qparams as tensors that broadcast against `x`: along `axis` (per-channel), or
// repeated over each block of a 2-D weight (block-wise).
std::pair<at::Tensor, at::Tensor> broadcast_qparams(const at::Tensor& x, const QParams& q, int64_t axis) {
  const at::Tensor z = q.zero_point.to(at::kFloat);
  if (q.block_size > 0) {
    if (x.dim() != 2) throw DataError("block-wise qparams need a 2-D weight, got rank " + std::to_string(x.dim()));
    return {expand_blocks(q.scale, x.size(0), x.size(1), q.block_size),
            expand_blocks(z, x.size(0), x.size(1), q.block_size)};
  }
  return {along(q.scale, x.dim(), axis), along(z, x.dim(), axis)};
}

// QuantizeLinear's codes as float: clamp(round_half_even(x / scale) + zp, quant_min,
// quant_max), the qparams broadcast as above (at::round rounds half to even).
at::Tensor quantize_codes(const at::Tensor& x, const QParams& q, int64_t axis) {
  const auto [s, z] = broadcast_qparams(x, q, axis);
  return at::clamp(at::round(x / s) + z, static_cast<double>(q.quant_min), static_cast<double>(q.quant_max));
}

// DequantizeLinear of (float or integer) codes: (codes - zp) * scale along `axis`.
at::Tensor dequantize_codes(const at::Tensor& codes, const QParams& q, int64_t axis) {
  const auto [s, z] = broadcast_qparams(codes, q, axis);
  return (codes.to(at::kFloat) - z) * s;
}

}  // namespace

at::Tensor quantize_weight_codes(const at::Tensor& w, const QParams& q, int64_t axis) {
  const at::Tensor codes = quantize_codes(w, q, axis);
  return q.dtype == QDType::kUInt8 ? codes.to(at::kByte) : codes.to(at::kChar);
}

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
  weight_q_ = register_buffer("weight_q", quantize_weight_codes(w, wq_, wq_.axis));
  if (input_scale > 0 && wq_.block_size == 0) {  // block-wise: no one weight scale per channel, the bias stays float
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

fx::CallFn quant_dequant_call_fn(const std::shared_ptr<QuantDequant>& m) { return fx::tensor_call_fn(m); }

fx::CallFn quantized_call_fn(const std::shared_ptr<QuantizedConvLinear>& m) { return fx::tensor_call_fn(m); }

// --- saving (qfx::fx::save_graph_module) --------------------------------------------

c10::IValue QuantizedConvLinear::config() const {
  auto c = fx::make_config();
  detail::save_conv_settings(c, {op_, act_, stride_, padding_, dilation_, output_padding_, groups_});
  c.insert("type_name", type_name_);
  c.insert("weight_quantized", weight_quantized());
  c.insert("weight_per_channel", wq_.per_channel);
  c.insert("weight_quant_min", wq_.quant_min);
  c.insert("weight_quant_max", wq_.quant_max);
  c.insert("weight_dtype", std::string(qdtype_name(wq_.dtype)));
  if (wq_.block_size > 0) c.insert("weight_block_size", wq_.block_size);
  c.insert("int32_bias", bias_q_.defined());
  return c;
}

std::shared_ptr<QuantizedConvLinear> QuantizedConvLinear::from_config(const c10::IValue& config) {
  using fx::config_at;
  std::shared_ptr<QuantizedConvLinear> q(new QuantizedConvLinear());
  const detail::ConvSettings s = detail::load_conv_settings(config);
  q->op_ = s.op;
  q->act_ = s.act;
  q->stride_ = s.stride;
  q->padding_ = s.padding;
  q->dilation_ = s.dilation;
  q->output_padding_ = s.output_padding;
  q->groups_ = s.groups;
  q->type_name_ = config_at(config, "type_name").toStringRef();
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const auto i32 = at::TensorOptions().dtype(at::kInt);
  q->bias_ = q->register_buffer("bias", at::zeros({0}, f32));
  if (!config_at(config, "weight_quantized").toBool()) {
    q->weight_q_ = q->register_buffer("weight", at::zeros({0}, f32));
    return q;
  }
  q->wq_.per_channel = config_at(config, "weight_per_channel").toBool();
  q->wq_.quant_min = config_at(config, "weight_quant_min").toInt();
  q->wq_.quant_max = config_at(config, "weight_quant_max").toInt();
  q->wq_.dtype = parse_qdtype(config_at(config, "weight_dtype").toStringRef());
  q->wq_.axis = q->weight_out_axis();
  const auto& cfg = config.toGenericDict();
  if (cfg.contains("weight_block_size")) q->wq_.block_size = cfg.at("weight_block_size").toInt();
  q->wq_.scale = q->register_buffer("weight_scale", at::zeros({0}, f32));
  q->wq_.zero_point = q->register_buffer("weight_zero_point", at::zeros({0}, i32));
  q->weight_q_ = q->register_buffer(
      "weight_q", at::zeros({0}, at::TensorOptions().dtype(q->wq_.dtype == QDType::kUInt8 ? at::kByte : at::kChar)));
  if (config_at(config, "int32_bias").toBool()) {
    q->bias_q_ = q->register_buffer("bias_q", at::zeros({0}, i32));
    q->bias_scale_ = q->register_buffer("bias_scale", at::zeros({0}, f32));
  }
  return q;
}

}  // namespace qfx::quant
