#include "qfx/quant/modules.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "conv_settings.h"
#include "qfx/fx/serialize.h"
#include "qfx/fx/torch_compat.h"
#include "qfx/error.h"

namespace qfx::quant {
namespace {

template <size_t D>
std::vector<int64_t> vec(const torch::ExpandingArray<D>& a) {
  return std::vector<int64_t>(a->begin(), a->end());
}

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool transposed = false;
  int dims = 2;
  at::Tensor weight, bias;
};

template <size_t D, typename Impl>
bool read_conv(Impl* c, ConvParams* p, std::string* why) {
  const auto& o = c->options;
  if (!fx::compat::get_if<torch::enumtype::kZeros>(&o.padding_mode())) {
    *why = "padding modes other than 'zeros' are not fused";
    return false;
  }
  p->stride = vec<D>(o.stride());
  p->dilation = vec<D>(o.dilation());
  p->output_padding = vec<D>(o.output_padding());
  p->groups = o.groups();
  p->transposed = o.transposed();
  p->dims = static_cast<int>(D);
  if (const auto* pad = fx::compat::get_if<torch::ExpandingArray<D>>(&o.padding())) {
    p->padding = vec<D>(*pad);
  } else if (fx::compat::get_if<torch::enumtype::kValid>(&o.padding())) {
    p->padding.assign(D, 0);
  } else {  // 'same' (stride 1): symmetric only when dilation * (k - 1) is even
    const auto k = vec<D>(o.kernel_size());
    for (size_t i = 0; i < D; ++i) {
      const int64_t total = p->dilation[i] * (k[i] - 1);
      if (total % 2 != 0) {
        *why = "padding='same' with an even kernel pads asymmetrically";
        return false;
      }
      p->padding.push_back(total / 2);
    }
  }
  p->weight = c->weight;
  p->bias = c->bias;
  return true;
}

}  // namespace

at::Tensor FusedConvLinear::channel_view(const at::Tensor& v, int64_t rank, int64_t axis) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = -1;
  return v.reshape(shape);
}

bool FusedConvLinear::read_op(const std::shared_ptr<torch::nn::Module>& m, std::string* why) {
  ConvParams p;
  bool ok = false;
  if (auto c1 = std::dynamic_pointer_cast<torch::nn::Conv1dImpl>(m)) ok = read_conv<1>(c1.get(), &p, why), base_op_ = "conv1d";
  else if (auto c2 = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(m)) ok = read_conv<2>(c2.get(), &p, why), base_op_ = "conv2d";
  else if (auto c3 = std::dynamic_pointer_cast<torch::nn::Conv3dImpl>(m)) ok = read_conv<3>(c3.get(), &p, why), base_op_ = "conv3d";
  else if (auto t2 = std::dynamic_pointer_cast<torch::nn::ConvTranspose2dImpl>(m))
    ok = read_conv<2>(t2.get(), &p, why), base_op_ = "conv_transpose2d";
  else if (auto l = std::dynamic_pointer_cast<torch::nn::LinearImpl>(m)) {
    op_ = Op::kLinear;
    base_op_ = "linear";
    weight_ = l->weight;
    bias_ = l->bias;
    return true;
  } else {
    *why = "not a Conv1d/2d/3d, ConvTranspose2d or Linear module";
    return false;
  }
  if (!ok) return false;
  op_ = p.transposed ? Op::kConvTranspose : Op::kConv;
  stride_ = p.stride;
  padding_ = p.padding;
  dilation_ = p.dilation;
  output_padding_ = p.output_padding;
  groups_ = p.groups;
  dims_ = p.dims;
  weight_ = p.weight;
  bias_ = p.bias;
  return true;
}

int64_t FusedConvLinear::out_channels() const {
  return op_ == Op::kConvTranspose ? weight_.size(1) * groups_ : weight_.size(0);
}

bool FusedConvLinear::read_bn(const std::shared_ptr<torch::nn::Module>& bn, std::string* why) {
  auto take = [&](auto impl) {
    bn_eps_ = impl->options.eps();
    if (!impl->options.track_running_stats()) {
      *why = "the batch norm keeps no running statistics";
      return false;
    }
    bn_weight_ = impl->options.affine() ? impl->weight : at::Tensor();
    bn_bias_ = impl->options.affine() ? impl->bias : at::Tensor();
    bn_mean_ = impl->running_mean;
    bn_var_ = impl->running_var;
    bn_forward_ = [impl](const at::Tensor& x) { return impl->forward(x); };
    return true;
  };
  bool ok;
  if (auto b1 = std::dynamic_pointer_cast<torch::nn::BatchNorm1dImpl>(bn)) ok = take(b1);
  else if (auto b2 = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(bn)) ok = take(b2);
  else if (auto b3 = std::dynamic_pointer_cast<torch::nn::BatchNorm3dImpl>(bn)) ok = take(b3);
  else {
    *why = "not a BatchNorm1d/2d/3d module";
    return false;
  }
  if (!ok) return false;
  if (bn_mean_.numel() != out_channels()) {
    *why = "the batch norm has " + std::to_string(bn_mean_.numel()) + " channels, the op " +
           std::to_string(out_channels());
    return false;
  }
  if (op_ == Op::kConvTranspose && groups_ != 1) {
    *why = "batch norm after a grouped transposed conv is not folded";
    return false;
  }
  return true;
}

std::shared_ptr<FusedConvLinear> FusedConvLinear::create(const std::shared_ptr<torch::nn::Module>& op,
                                                         const std::shared_ptr<torch::nn::Module>& bn, BnMode mode,
                                                         FusedActivation act, std::string* why) {
  std::string dummy;
  if (!why) why = &dummy;
  std::shared_ptr<FusedConvLinear> f(new FusedConvLinear());
  if (!f->read_op(op, why)) return nullptr;
  f->act_ = act;
  if (bn) {
    if (!f->read_bn(bn, why)) return nullptr;
    if (mode == BnMode::kFold) {
      at::NoGradGuard ng;
      const bool rg = f->weight_.requires_grad();
      at::Tensor sf = f->bn_weight_.defined() ? f->bn_weight_ / at::sqrt(f->bn_var_ + f->bn_eps_)
                                              : at::reciprocal(at::sqrt(f->bn_var_ + f->bn_eps_));
      at::Tensor w = f->weight_ * channel_view(sf, f->weight_.dim(), f->weight_out_axis());
      at::Tensor b = f->bias_.defined() ? f->bias_ : at::zeros_like(f->bn_mean_);
      b = (b - f->bn_mean_) * sf;
      if (f->bn_bias_.defined()) b = b + f->bn_bias_;
      f->weight_ = w.contiguous().set_requires_grad(rg);
      f->bias_ = b.contiguous().set_requires_grad(rg);
      f->bn_folded_ = true;
      f->bn_forward_ = nullptr;
      f->bn_weight_ = f->bn_bias_ = f->bn_mean_ = f->bn_var_ = at::Tensor();
    } else {
      f->bn_ = bn;
    }
  }
  f->weight_ = f->register_parameter("weight", f->weight_, f->weight_.requires_grad());
  if (f->bias_.defined()) f->bias_ = f->register_parameter("bias", f->bias_, f->bias_.requires_grad());
  if (f->bn_) f->register_module("bn", f->bn_);
  return f;
}

void FusedConvLinear::unshare_parameters() {
  if (own_parameters_ || bn_) return;  // a simulated batch norm reads the shared tensors by design (QAT)
  at::NoGradGuard ng;
  const bool rg = weight_.requires_grad();
  weight_ = parameters_["weight"] = weight_.detach().clone().set_requires_grad(rg);
  if (bias_.defined()) bias_ = parameters_["bias"] = bias_.detach().clone().set_requires_grad(bias_.requires_grad());
  own_parameters_ = true;
}

void FusedConvLinear::add_bias(const at::Tensor& b) {
  if (bias_.defined()) throw ArgumentError("FusedConvLinear::add_bias: the module already has a bias");
  if (bn_) throw ArgumentError("FusedConvLinear::add_bias: not with a simulated batch norm");
  bias_ = register_parameter("bias", b.detach().clone().set_requires_grad(weight_.requires_grad()),
                             weight_.requires_grad());
}

void FusedConvLinear::set_weight_fake_quant(std::shared_ptr<FakeQuantize> fq) {
  if (wfq_) unregister_module("weight_fake_quant");
  wfq_ = std::move(fq);
  if (wfq_) register_module("weight_fake_quant", wfq_);
}

at::Tensor FusedConvLinear::raw_op(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const {
  if (op_ == Op::kLinear) return at::linear(x, w, b);
  return at::convolution(x, w, b, stride_, padding_, dilation_, op_ == Op::kConvTranspose, output_padding_, groups_);
}

at::Tensor FusedConvLinear::forward(const at::Tensor& x) {
  at::Tensor y;
  if (bn_) {
    at::Tensor sf = bn_weight_.defined() ? bn_weight_ / at::sqrt(bn_var_ + bn_eps_)
                                         : at::reciprocal(at::sqrt(bn_var_ + bn_eps_));
    at::Tensor w = weight_ * channel_view(sf, weight_.dim(), weight_out_axis());
    if (wfq_) w = wfq_->forward(w);
    y = raw_op(x, w, at::Tensor());
    const int64_t axis = op_ == Op::kLinear ? y.dim() - 1 : 1;
    y = y / channel_view(sf, y.dim(), axis);
    if (bias_.defined()) y = y + channel_view(bias_, y.dim(), axis);
    y = bn_forward_(y);
  } else {
    y = raw_op(x, wfq_ ? wfq_->forward(weight_) : weight_, bias_);
  }
  return apply_activation(y, act_);
}

at::Tensor apply_activation(const at::Tensor& y, FusedActivation a) {
  switch (a) {
    case FusedActivation::kReLU: return at::relu(y);
    case FusedActivation::kReLU6: return at::hardtanh(y, 0.0, 6.0);
    case FusedActivation::kNone: break;
  }
  return y;
}

void FusedConvLinear::freeze_bn_stats() {
  bn_frozen_ = true;
  if (bn_) bn_->eval();
}

void FusedConvLinear::update_bn_stats() {
  bn_frozen_ = false;
  if (bn_) bn_->train(is_training());
}

void FusedConvLinear::train(bool on) {
  torch::nn::Module::train(on);
  if (bn_ && bn_frozen_) bn_->eval();
}

std::pair<at::Tensor, at::Tensor> FusedConvLinear::folded_weight_bias() const {
  at::NoGradGuard ng;
  at::Tensor w = weight_.detach(), b = bias_.defined() ? bias_.detach() : at::zeros({out_channels()}, w.options());
  if (bn_) {
    at::Tensor sf = bn_weight_.defined() ? bn_weight_ / at::sqrt(bn_var_ + bn_eps_)
                                         : at::reciprocal(at::sqrt(bn_var_ + bn_eps_));
    w = w * channel_view(sf, w.dim(), weight_out_axis());
    b = (b - bn_mean_) * sf;
    if (bn_bias_.defined()) b = b + bn_bias_;
  }
  return {w.contiguous(), b.contiguous()};
}

std::string FusedConvLinear::type_name() const {
  std::string s = op_ == Op::kLinear ? "Linear" : op_ == Op::kConvTranspose ? "ConvTranspose" : "Conv";
  if (has_bn()) s += "Bn";
  if (act_ == FusedActivation::kReLU) s += "ReLU";
  if (act_ == FusedActivation::kReLU6) s += "ReLU6_";
  if (op_ != Op::kLinear) s += std::to_string(dims_) + "d";
  else if (has_bn()) s += "1d";
  return s;
}

fx::CallFn fused_call_fn(const std::shared_ptr<FusedConvLinear>& m) { return fx::tensor_call_fn(m); }

void freeze_bn_stats(torch::nn::Module& model) {
  for (const auto& m : model.modules(true))
    if (auto* f = dynamic_cast<FusedConvLinear*>(m.get())) f->freeze_bn_stats();
}

void update_bn_stats(torch::nn::Module& model) {
  for (const auto& m : model.modules(true))
    if (auto* f = dynamic_cast<FusedConvLinear*>(m.get())) f->update_bn_stats();
}

// --- saving (qfx::fx::save_graph_module) --------------------------------------------

c10::IValue FusedConvLinear::config() const {
  auto c = fx::make_config();
  detail::save_conv_settings(c, {op_, act_, stride_, padding_, dilation_, output_padding_, groups_});
  c.insert("base_op", base_op_);
  c.insert("dims", static_cast<int64_t>(dims_));
  c.insert("weight_shape", weight_.sizes().vec());
  c.insert("has_bias", bias_.defined());
  c.insert("bn", bn_ ? fx::save_module_record(*bn_) : c10::IValue());
  c.insert("bn_folded", bn_folded_);
  c.insert("bn_frozen", bn_frozen_);
  c.insert("weight_fake_quant", wfq_ ? fx::save_module_record(*wfq_) : c10::IValue());
  return c;
}

std::shared_ptr<FusedConvLinear> FusedConvLinear::from_config(const c10::IValue& config) {
  using fx::config_at;
  std::shared_ptr<FusedConvLinear> f(new FusedConvLinear());
  const detail::ConvSettings s = detail::load_conv_settings(config);
  f->op_ = s.op;
  f->act_ = s.act;
  f->stride_ = s.stride;
  f->padding_ = s.padding;
  f->dilation_ = s.dilation;
  f->output_padding_ = s.output_padding;
  f->groups_ = s.groups;
  f->base_op_ = config_at(config, "base_op").toStringRef();
  f->dims_ = static_cast<int>(config_at(config, "dims").toInt());
  const auto shape = config_at(config, "weight_shape").toIntVector();
  if (shape.empty()) throw IoError("empty weight shape");
  f->weight_ = f->register_parameter("weight", at::zeros(shape));
  if (config_at(config, "has_bias").toBool()) {
    f->bias_ = f->register_parameter("bias", at::zeros({f->out_channels()}));
  }
  f->bn_folded_ = config_at(config, "bn_folded").toBool();
  const c10::IValue bn = config_at(config, "bn");
  if (!bn.isNone()) {
    std::string why;
    auto m = fx::load_module_record(bn).module;
    if (!f->read_bn(m, &why)) throw IoError("batch norm: " + why);
    f->bn_ = m;
    f->register_module("bn", f->bn_);
  }
  f->bn_frozen_ = config_at(config, "bn_frozen").toBool();
  const c10::IValue wfq = config_at(config, "weight_fake_quant");
  if (!wfq.isNone()) {
    auto fq = std::dynamic_pointer_cast<FakeQuantize>(fx::load_module_record(wfq).module);
    if (!fq) throw IoError("weight_fake_quant is not a FakeQuantize");
    f->set_weight_fake_quant(fq);
  }
  return f;
}

}  // namespace qfx::quant
