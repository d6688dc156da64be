#include "qfx/quant/observer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "float_view.h"
#include "qfx/error.h"
#include "qfx/quant/block_quant.h"
#include "qfx/stats/min_max.h"

namespace qfx::quant {
namespace {

at::Tensor scalar(float v) { return at::full({}, v, at::TensorOptions().dtype(at::kFloat)); }
constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

// --- ObserverBase ------------------------------------------------------------

ObserverBase::ObserverBase(const std::string& type_name, QuantSpec spec)
    : torch::nn::Module(type_name), spec_(std::move(spec)) {}

at::Tensor ObserverBase::forward(const at::Tensor& x_in) {
  if (x_in.numel() == 0) return x_in;
  at::NoGradGuard ng;
  if (!x_in.device().is_cpu()) {
    observe_on_device(x_in.detach());
    return x_in;
  }
  const at::Tensor x = x_in.detach().to(at::kFloat).contiguous();
  observe(detail::float_view(x, tensor_name_));
  return x_in;
}

void ObserverBase::observe_on_device(const at::Tensor& x_in) {
  if (x_in.numel() == 0) return;
  at::NoGradGuard ng;
  const at::Tensor x = x_in.detach().to(at::kCPU, at::kFloat).contiguous();
  observe(detail::float_view(x, tensor_name_));
}

void ObserverBase::to(torch::Device, torch::Dtype, bool) {}
void ObserverBase::to(torch::Device, bool) {}

void ObserverBase::commit(const DeferredObservation&) {
  throw InternalError("observer of '" + tensor_name_ + "' (" + name() + ") cannot commit a deferred observation");
}

void ObserverBase::set_spec(const QuantSpec& spec) {
  if (spec.per_channel != spec_.per_channel || spec.block_size != spec_.block_size)
    throw ConfigError("observer of '" + tensor_name_ + "': cannot change between per-tensor, per-channel and per-block");
  spec_ = spec;
}

bool ObserverBase::has_data() const {
  auto mm = min_max();
  return mm.first.numel() > 0 && at::le(mm.first, mm.second).all().item<bool>();
}

QParams ObserverBase::calculate_qparams() const {
  if (!has_data()) {
    // torch.ao returns scale 1, zero_point 0 for an observer that saw nothing.
    QParams q;
    q.scale = scalar(1.0f);
    q.zero_point = at::zeros({}, at::TensorOptions().dtype(at::kInt));
    q.per_channel = false;
    q.quant_min = spec_.quant_min;
    q.quant_max = spec_.quant_max;
    q.dtype = spec_.dtype;
    return q;
  }
  auto r = clip_range();
  return compute_qparams(r.first, r.second, spec_);
}

// --- MinMaxObserver ------------------------------------------------------------

MinMaxObserver::MinMaxObserver(QuantSpec spec) : MinMaxObserver("MinMaxObserver", std::move(spec)) {}

MinMaxObserver::MinMaxObserver(const std::string& type_name, QuantSpec spec)
    : ObserverBase(type_name, std::move(spec)) {
  spec_.per_channel = false;
  min_val_ = register_buffer("min_val", scalar(kInf));
  max_val_ = register_buffer("max_val", scalar(-kInf));
}

void MinMaxObserver::observe(const stats::FloatView& v) {
  const int64_t n = v.numel();
  if (n == 0) return;
  float lo, hi;
  stats::checked_min_max(v.data, n, tensor_name_, &lo, &hi);
  replay_range(lo, hi);
}

void detail::checked_aminmax(const at::Tensor& x, const std::string& name, float* lo, float* hi) {
  const auto [mn, mx] = at::aminmax(x);
  const float ext[2] = {mn.item<float>(), mx.item<float>()};
  stats::checked_min_max(ext, 2, name, lo, hi);
}

void MinMaxObserver::observe_on_device(const at::Tensor& x_in) {
  if (x_in.numel() == 0) return;
  at::NoGradGuard ng;
  float lo, hi;
  detail::checked_aminmax(x_in.detach().to(at::kFloat), tensor_name_, &lo, &hi);
  replay_range(lo, hi);
}

bool MinMaxObserver::defer(const at::Tensor& x_in, DeferredObservation* out) const {
  *out = DeferredObservation{};
  if (x_in.numel() == 0) return true;
  at::NoGradGuard ng;
  const at::Tensor x = x_in.detach().to(at::kFloat).contiguous();
  stats::checked_min_max(x.data_ptr<float>(), x.numel(), tensor_name_, &out->lo, &out->hi);
  out->empty = false;
  return true;
}

void MinMaxObserver::commit(const DeferredObservation& d) {
  if (d.empty) return;
  replay_range(d.lo, d.hi);
}

bool MinMaxObserver::replay_range(float lo, float hi) {
  float* mn = min_val_.data_ptr<float>();
  float* mx = max_val_.data_ptr<float>();
  const bool first = *mn == kInf && *mx == -kInf;
  stats::accumulate_range(mn, mx, &lo, &hi, 1, first, c_);
  return true;
}

void MinMaxObserver::merge(const ObserverBase& other) {
  const auto* o = dynamic_cast<const MinMaxObserver*>(&other);
  if (!o) throw ArgumentError("merge: observer types differ");
  stats::accumulate_range(min_val_.data_ptr<float>(), max_val_.data_ptr<float>(), o->min_val_.data_ptr<float>(),
                          o->max_val_.data_ptr<float>(), 1, false, 0.0);
}

void MinMaxObserver::reset() {
  min_val_.fill_(kInf);
  max_val_.fill_(-kInf);
}

MovingAverageMinMaxObserver::MovingAverageMinMaxObserver(QuantSpec spec, double c)
    : MinMaxObserver("MovingAverageMinMaxObserver", std::move(spec)) {
  c_ = c;
  if (!(c > 0 && c <= 1)) throw ConfigError("averaging_constant must be in (0, 1]");
}

// --- per channel ---------------------------------------------------------------

PerChannelMinMaxObserver::PerChannelMinMaxObserver(QuantSpec spec)
    : PerChannelMinMaxObserver("PerChannelMinMaxObserver", std::move(spec)) {}

PerChannelMinMaxObserver::PerChannelMinMaxObserver(const std::string& type_name, QuantSpec spec)
    : ObserverBase(type_name, std::move(spec)) {
  spec_.per_channel = true;
  min_val_ = register_buffer("min_val", at::empty({0}, at::TensorOptions().dtype(at::kFloat)));
  max_val_ = register_buffer("max_val", at::empty({0}, at::TensorOptions().dtype(at::kFloat)));
}

std::pair<at::Tensor, at::Tensor> PerChannelMinMaxObserver::min_max() const { return {min_val_, max_val_}; }

void PerChannelMinMaxObserver::observe(const stats::FloatView& v) {
  if (v.numel() == 0) return;
  if (spec_.block_size > 0) {  // one "channel" per block row of the [C, K] weight
    if (v.channels_last) throw InternalError("block-wise weight '" + tensor_name_ + "' observed channels last");
    const at::Tensor x = at::from_blob(const_cast<float*>(v.data), v.shape, at::TensorOptions().dtype(at::kFloat));
    const at::Tensor rows = to_blocks(x, spec_.block_size, tensor_name_.c_str()).contiguous();
    stats::FloatView bv = detail::float_view(rows, tensor_name_);
    std::vector<float> lo, hi;
    stats::channel_min_max(bv, 0, &lo, &hi);
    return fold_channels(lo, hi);
  }
  std::vector<float> lo, hi;
  stats::FloatView named = v;
  named.name = tensor_name_;
  stats::channel_min_max(named, spec_.ch_axis, &lo, &hi);
  fold_channels(lo, hi);
}

void PerChannelMinMaxObserver::observe_on_device(const at::Tensor& x_in) {
  if (x_in.numel() == 0) return;
  at::NoGradGuard ng;
  const int64_t rank = x_in.dim(), axis = spec_.ch_axis < 0 ? spec_.ch_axis + rank : spec_.ch_axis;
  if (axis < 0 || axis >= rank || spec_.block_size > 0) return ObserverBase::observe_on_device(x_in);
  const at::Tensor rows = x_in.detach().to(at::kFloat).movedim(axis, 0).reshape({x_in.size(axis), -1});
  const auto [mn, mx] = at::aminmax(rows, /*dim=*/1);
  const at::Tensor l = mn.to(at::kCPU).contiguous(), h = mx.to(at::kCPU).contiguous();
  std::vector<float> lo(l.data_ptr<float>(), l.data_ptr<float>() + l.numel());
  std::vector<float> hi(h.data_ptr<float>(), h.data_ptr<float>() + h.numel());
  std::vector<float> both = lo;  // the host check on the extremes refuses NaN (propagated) and Inf
  both.insert(both.end(), hi.begin(), hi.end());
  float a, b;
  stats::checked_min_max(both.data(), static_cast<int64_t>(both.size()), tensor_name_, &a, &b);
  fold_channels(lo, hi);
}

void PerChannelMinMaxObserver::fold_channels(const std::vector<float>& lo, const std::vector<float>& hi) {
  const bool first = min_val_.numel() == 0;
  if (!first && min_val_.numel() != static_cast<int64_t>(lo.size()))
    throw DataError("per-channel observer of '" + tensor_name_ + "': channel count changed from " +
                    std::to_string(min_val_.numel()) + " to " + std::to_string(lo.size()));
  if (first) {
    min_val_.resize_({static_cast<int64_t>(lo.size())});
    max_val_.resize_({static_cast<int64_t>(hi.size())});
  }
  stats::accumulate_range(min_val_.data_ptr<float>(), max_val_.data_ptr<float>(), lo.data(), hi.data(), lo.size(), first,
                          c_);
}

void PerChannelMinMaxObserver::merge(const ObserverBase& other) {
  const auto* o = dynamic_cast<const PerChannelMinMaxObserver*>(&other);
  if (!o) throw ArgumentError("merge: observer types differ");
  if (o->min_val_.numel() == 0) return;
  at::NoGradGuard ng;
  if (min_val_.numel() == 0) {
    min_val_.resize_(o->min_val_.sizes()).copy_(o->min_val_);
    max_val_.resize_(o->max_val_.sizes()).copy_(o->max_val_);
    return;
  }
  if (min_val_.sizes() != o->min_val_.sizes()) throw ArgumentError("merge: channel counts differ");
  stats::accumulate_range(min_val_.data_ptr<float>(), max_val_.data_ptr<float>(), o->min_val_.data_ptr<float>(),
                          o->max_val_.data_ptr<float>(), static_cast<size_t>(min_val_.numel()), false, 0.0);
}

void PerChannelMinMaxObserver::reset() {
  min_val_.resize_({0});
  max_val_.resize_({0});
}

MovingAveragePerChannelMinMaxObserver::MovingAveragePerChannelMinMaxObserver(QuantSpec spec, double c)
    : PerChannelMinMaxObserver("MovingAveragePerChannelMinMaxObserver", std::move(spec)) {
  c_ = c;
  if (!(c > 0 && c <= 1)) throw ConfigError("averaging_constant must be in (0, 1]");
}

// --- FixedQParamsObserver -----------------------------------------------------------

FixedQParamsObserver::FixedQParamsObserver(QuantSpec spec, float lo, float hi)
    : ObserverBase("FixedQParamsObserver", std::move(spec)), lo_(lo), hi_(hi) {
  if (!(hi > lo)) throw ConfigError("FixedQParamsObserver: empty range");
  spec_.per_channel = false;
}

std::pair<at::Tensor, at::Tensor> FixedQParamsObserver::min_max() const { return {scalar(lo_), scalar(hi_)}; }

QParams FixedQParamsObserver::fixed_qparams() const {
  QParams q;
  float scale = (hi_ - lo_) / static_cast<float>(spec_.quant_max - spec_.quant_min + 1);
  int64_t zp = spec_.quant_min - static_cast<int64_t>(std::nearbyint(lo_ / scale));
  if (spec_.qscheme == QScheme::kSymmetric && spec_.dtype != QDType::kUInt8) {
    // A symmetric target keeps zero point 0: [0, 1] and [-1, 1] get scale 1/128
    // (the top code saturates at 127/128), a power of two.
    scale = std::max(std::abs(lo_), std::abs(hi_)) / static_cast<float>(spec_.quant_max + 1);
    zp = 0;
  }
  q.scale = scalar(scale);
  q.zero_point = at::full({}, zp, at::TensorOptions().dtype(at::kInt));
  q.quant_min = spec_.quant_min;
  q.quant_max = spec_.quant_max;
  q.dtype = spec_.dtype;
  return q;
}

// --- factory ---------------------------------------------------------------------------

const char* observer_kind_name(ObserverKind k) {
  switch (k) {
    case ObserverKind::kMinMax: return "minmax";
    case ObserverKind::kMovingAverageMinMax: return "moving_average_minmax";
    case ObserverKind::kPerChannelMinMax: return "per_channel_minmax";
    case ObserverKind::kMovingAveragePerChannelMinMax: return "moving_average_per_channel_minmax";
    case ObserverKind::kHistogram: return "histogram";
  }
  return "?";
}

ObserverKind parse_observer_kind(const std::string& s) {
  for (auto k : {ObserverKind::kMinMax, ObserverKind::kMovingAverageMinMax, ObserverKind::kPerChannelMinMax,
                 ObserverKind::kMovingAveragePerChannelMinMax, ObserverKind::kHistogram})
    if (s == observer_kind_name(k)) return k;
  throw ConfigError("unknown observer '" + s +
                              "' (expected minmax, moving_average_minmax, per_channel_minmax, "
                              "moving_average_per_channel_minmax or histogram)");
}

std::shared_ptr<ObserverBase> make_observer(const ObserverSpec& s) {
  QuantSpec q = s.spec;
  const bool pc = s.kind == ObserverKind::kPerChannelMinMax || s.kind == ObserverKind::kMovingAveragePerChannelMinMax;
  if (q.per_channel != pc)
    throw ConfigError(std::string("observer '") + observer_kind_name(s.kind) + "' is " +
                                (pc ? "per-channel" : "per-tensor") + " but the quantization spec is " +
                                (q.per_channel ? "per-channel" : "per-tensor"));
  if (s.kind != ObserverKind::kHistogram && s.algorithm != Algorithm::kMinMax)
    throw ConfigError(std::string("algorithm '") + algorithm_name(s.algorithm) +
                                "' needs the histogram observer (got '" + observer_kind_name(s.kind) + "')");
  switch (s.kind) {
    case ObserverKind::kMinMax: return std::make_shared<MinMaxObserver>(q);
    case ObserverKind::kMovingAverageMinMax: return std::make_shared<MovingAverageMinMaxObserver>(q, s.averaging_constant);
    case ObserverKind::kPerChannelMinMax: return std::make_shared<PerChannelMinMaxObserver>(q);
    case ObserverKind::kMovingAveragePerChannelMinMax:
      return std::make_shared<MovingAveragePerChannelMinMaxObserver>(q, s.averaging_constant);
    case ObserverKind::kHistogram: return std::make_shared<HistogramObserver>(q, s.algorithm, s.options, s.bins);
  }
  throw ConfigError("unknown observer kind");
}

}  // namespace qfx::quant
