#include "qfx/quant/fake_quantize.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include "qfx/error.h"
#include "qfx/quant/block_quant.h"

namespace qfx::quant {
namespace {

// `fq` (a per-channel fake quantization along axis 0) applied to the [C, K] weight `x`
// viewed as one row per block of `block_size` (block-wise qparams, flat [C * blocks]).
template <typename Fn>
at::Tensor per_block(const at::Tensor& x, int64_t block_size, const std::string& name, Fn&& fq) {
  return from_blocks(fq(to_blocks(x, block_size, name.c_str())), x.size(0), x.size(1));
}

}  // namespace

FakeQuantize::FakeQuantize(std::shared_ptr<ObserverBase> observer, bool learnable)
    : torch::nn::Module(learnable ? "LearnableFakeQuantize" : "FakeQuantize"),
      observer_(std::move(observer)), learnable_(learnable) {
  register_module("activation_post_process", observer_);
  auto f = at::TensorOptions().dtype(at::kFloat);
  auto u8 = at::TensorOptions().dtype(at::kByte);
  if (learnable_) {
    scale_ = register_parameter("scale", at::ones({1}, f));
    zero_point_ = register_buffer("zero_point", at::zeros({1}, f));
  } else {
    scale_ = register_buffer("scale", at::ones({1}, f));
    zero_point_ = register_buffer("zero_point", at::zeros({1}, at::TensorOptions().dtype(at::kInt)));
  }
  observer_enabled_ = register_buffer("observer_enabled", at::ones({1}, u8));
  fake_quant_enabled_ = register_buffer("fake_quant_enabled", at::ones({1}, u8));
  initialized_ = register_buffer("initialized", at::zeros({1}, u8));
  frozen_ = register_buffer("qparams_frozen", at::zeros({1}, u8));
}

bool FakeQuantize::qparams_frozen() const { return frozen_.item<uint8_t>() != 0; }

void FakeQuantize::freeze_qparams() {
  if (learnable_) throw ArgumentError("FakeQuantize::freeze_qparams: a learnable (LSQ) scale cannot be frozen");
  if (stale_ && observer_->has_data()) calculate_qparams();
  observer_enabled_.fill_(0);
  frozen_.fill_(1);
  stale_ = false;
}

bool FakeQuantize::observer_enabled() const { return observer_enabled_.item<uint8_t>() != 0; }
bool FakeQuantize::fake_quant_enabled() const { return fake_quant_enabled_.item<uint8_t>() != 0; }
void FakeQuantize::enable_observer(bool on) { observer_enabled_.fill_(on && !qparams_frozen() ? 1 : 0); }
void FakeQuantize::enable_fake_quant(bool on) { fake_quant_enabled_.fill_(on ? 1 : 0); }

void FakeQuantize::set_state(QuantState s) {
  enable_observer(s != QuantState::kFloat);
  enable_fake_quant(s == QuantState::kFakeQuant);
}

void FakeQuantize::calculate_qparams() {
  if (qparams_frozen()) return;
  at::NoGradGuard ng;
  QParams q = observer_->calculate_qparams();
  at::Tensor s = q.scale.reshape({-1});
  at::Tensor z = q.zero_point.reshape({-1});
  if (scale_.sizes() != s.sizes()) {  // set_data: a learnable scale is a leaf that cannot be resized in place
    scale_.set_data(at::empty(s.sizes(), scale_.options()));
    zero_point_.set_data(at::empty(z.sizes(), zero_point_.options()));
  }
  scale_.copy_(s);
  zero_point_.copy_(z.to(zero_point_.scalar_type()));
  if (observer_->has_data()) initialized_.fill_(1);
  stale_ = false;
}

QParams FakeQuantize::qparams() {
  if (!learnable_ && stale_ && observer_->has_data()) calculate_qparams();
  if (learnable_ && initialized_.item<uint8_t>() == 0 && observer_->has_data()) calculate_qparams();
  QParams q;
  const auto& spec = observer_->spec();
  at::Tensor s = scale_.detach().to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true);
  at::Tensor z = zero_point_.detach().to(at::kCPU);
  z = (learnable_ ? at::round(z) : z).to(at::kInt);
  q.per_channel = spec.per_channel;
  q.axis = spec.ch_axis;
  q.scale = spec.per_channel ? s : s.reshape({});
  q.zero_point = spec.per_channel ? z : z.reshape({});
  q.quant_min = spec.quant_min;
  q.quant_max = spec.quant_max;
  q.dtype = spec.dtype;
  q.block_size = spec.block_size;
  return q;
}

void FakeQuantize::to(torch::Device device, torch::Dtype, bool non_blocking) { to(device, non_blocking); }

void FakeQuantize::to(torch::Device device, bool non_blocking) {
  for (at::Tensor* t : {&scale_, &zero_point_}) t->set_data(t->to(device, non_blocking));
}

void FakeQuantize::record(const at::Tensor& d) {
  if (softmax_dim_ && d.dim() > 0)
    observer_->forward(at::maximum(d, std::get<0>(d.max(*softmax_dim_, /*keepdim=*/true)) - kSoftmaxSpan));
  else
    observer_->forward(d);
  observed();
}

void FakeQuantize::observed() {
  if (sync_) sync_(*observer_);
  stale_ = true;
}

void FakeQuantize::observe(const stats::FloatView& v) {
  if (!observer_enabled() || v.numel() == 0) return;
  if (softmax_dim_ && !v.shape.empty()) {  // the row maxima: through ATen, in the logical layout
    if (v.channels_last) throw InternalError("softmax input '" + observer_->tensor_name() + "' observed channels last");
    record(at::from_blob(const_cast<float*>(v.data), v.shape, at::TensorOptions().dtype(at::kFloat)));
    return;
  }
  observer_->observe(v);
  observed();
}

at::Tensor FakeQuantize::forward(const at::Tensor& x) {
  if (observer_enabled()) record(x.detach());
  if (!fake_quant_enabled()) return x;
  const auto& spec = observer_->spec();
  if (learnable_) {
    if (initialized_.item<uint8_t>() == 0) {
      if (!observer_->has_data()) observer_->forward(x.detach());
      calculate_qparams();
    }
    // As torch.ao's `scale.data.clamp_(eps)`: through .data(), which does not bump the
    // version counter, so a FakeQuantize called twice in one forward (shared qparams)
    // does not invalidate the first call's saved scale.
    scale_.data().clamp_min_(kScaleEps);
    const double grad_factor = 1.0 / std::sqrt(static_cast<double>(x.numel()) * static_cast<double>(spec.quant_max));
    if (spec.block_size > 0)
      return per_block(x, spec.block_size, observer_->tensor_name(), [&](const at::Tensor& rows) {
        return at::_fake_quantize_learnable_per_channel_affine(rows, scale_, zero_point_, 0, spec.quant_min,
                                                               spec.quant_max, grad_factor);
      });
    if (spec.per_channel)
      return at::_fake_quantize_learnable_per_channel_affine(x, scale_, zero_point_, spec.ch_axis, spec.quant_min,
                                                             spec.quant_max, grad_factor);
    return at::_fake_quantize_learnable_per_tensor_affine(x, scale_, zero_point_, spec.quant_min, spec.quant_max,
                                                          grad_factor);
  }
  if (stale_ && observer_->has_data()) calculate_qparams();
  if (spec.block_size > 0)
    return per_block(x, spec.block_size, observer_->tensor_name(), [&](const at::Tensor& rows) {
      return at::fake_quantize_per_channel_affine(rows, scale_, zero_point_, 0, spec.quant_min, spec.quant_max);
    });
  if (spec.per_channel)
    return at::fake_quantize_per_channel_affine(x, scale_, zero_point_, spec.ch_axis, spec.quant_min, spec.quant_max);
  at::Tensor out = at::fake_quantize_per_tensor_affine(x, scale_.reshape({}), zero_point_.reshape({}), spec.quant_min,
                                                       spec.quant_max);
  if (rounding_ == runtime::Rounding::kHalfEven) return out;
  // The target's rounding in the value, the STE's gradient.
  at::Tensor sim;
  {
    at::NoGradGuard ng;
    const at::Tensor v = x.detach() / scale_.reshape({});
    const at::Tensor r = rounding_ == runtime::Rounding::kHalfUp ? (v + 0.5).floor() : v.sign() * (v.abs() + 0.5).floor();
    const at::Tensor zp = zero_point_.reshape({}).to(at::kFloat);
    sim = ((r + zp).clamp(spec.quant_min, spec.quant_max) - zp) * scale_.reshape({}) - out.detach();
  }
  return out + sim;
}

namespace {

template <typename Fn>
int for_each_fake_quant(torch::nn::Module& model, Fn&& fn) {
  int n = 0;
  for (const auto& m : model.modules(/*include_self=*/true)) {
    if (auto* fq = dynamic_cast<FakeQuantize*>(m.get())) {
      fn(*fq);
      ++n;
    }
  }
  return n;
}

}  // namespace

int set_quant_state(torch::nn::Module& model, QuantState state) {
  return for_each_fake_quant(model, [state](FakeQuantize& fq) { fq.set_state(state); });
}
void enable_observer(torch::nn::Module& model, bool on) {
  for_each_fake_quant(model, [on](FakeQuantize& fq) { fq.enable_observer(on); });
}
void disable_observer(torch::nn::Module& model) { enable_observer(model, false); }
void enable_fake_quant(torch::nn::Module& model, bool on) {
  for_each_fake_quant(model, [on](FakeQuantize& fq) { fq.enable_fake_quant(on); });
}
void disable_fake_quant(torch::nn::Module& model) { enable_fake_quant(model, false); }

}  // namespace qfx::quant
