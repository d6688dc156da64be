#include "qfx/quant/observer.h"

#include <omp.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "qfx/error.h"

namespace qfx::quant {
namespace {

at::Tensor scalar(float v) { return at::full({}, v, at::TensorOptions().dtype(at::kFloat)); }
constexpr float kInf = std::numeric_limits<float>::infinity();

// Folds a batch's [lo, hi] into running statistics: the first batch is taken as
// is; later ones by running min/max (c == 0) or by the moving average
// m <- m + c * (batch - m) (torch.ao's MovingAverage*MinMaxObserver).
void accumulate(at::Tensor& min_val, at::Tensor& max_val, const at::Tensor& lo, const at::Tensor& hi, bool first,
                double c) {
  if (first) {
    min_val.resize_(lo.sizes()).copy_(lo);
    max_val.resize_(hi.sizes()).copy_(hi);
  } else if (c == 0) {
    min_val.copy_(at::minimum(lo, min_val));
    max_val.copy_(at::maximum(hi, max_val));
  } else {
    min_val.copy_(min_val + c * (lo - min_val));
    max_val.copy_(max_val + c * (hi - max_val));
  }
}

}  // namespace

// --- ObserverBase ------------------------------------------------------------

ObserverBase::ObserverBase(const std::string& type_name, QuantSpec spec)
    : torch::nn::Module(type_name), spec_(std::move(spec)) {}

void ObserverBase::check_finite(const at::Tensor& lo, const at::Tensor& hi) const {
  if (!at::isfinite(lo).all().item<bool>() || !at::isfinite(hi).all().item<bool>()) {
    throw DataError("observed tensor '" + (tensor_name_.empty() ? std::string("?") : tensor_name_) +
                    "' contains NaN or Inf (min " + std::to_string(lo.min().item<float>()) + ", max " +
                    std::to_string(hi.max().item<float>()) + ")");
  }
}

void ObserverBase::set_spec(const QuantSpec& spec) {
  if (spec.per_channel != spec_.per_channel)
    throw ConfigError("observer of '" + tensor_name_ + "': cannot change between per-tensor and per-channel");
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

at::Tensor MinMaxObserver::forward(const at::Tensor& x_in) {
  if (x_in.numel() == 0) return x_in;
  at::NoGradGuard ng;
  at::Tensor x = x_in.detach().to(at::kFloat);
  auto [lo, hi] = at::aminmax(x);
  check_finite(lo, hi);
  const bool first = min_val_.item<float>() == kInf && max_val_.item<float>() == -kInf;
  accumulate(min_val_, max_val_, lo, hi, first, c_);
  last_lo_ = lo.item<float>();
  last_hi_ = hi.item<float>();
  has_last_ = true;
  return x_in;
}

bool MinMaxObserver::last_batch_range(float* lo, float* hi) const {
  if (!has_last_) return false;
  *lo = last_lo_;
  *hi = last_hi_;
  return true;
}

bool HistogramObserver::last_batch_range(float* lo, float* hi) const {
  if (!has_last_) return false;
  *lo = last_lo_;
  *hi = last_hi_;
  return true;
}

bool MinMaxObserver::replay_range(float lo, float hi) {
  at::NoGradGuard ng;
  const bool first = min_val_.item<float>() == kInf && max_val_.item<float>() == -kInf;
  accumulate(min_val_, max_val_, scalar(lo), scalar(hi), first, c_);
  return true;
}

void MinMaxObserver::merge(const ObserverBase& other) {
  const auto* o = dynamic_cast<const MinMaxObserver*>(&other);
  if (!o) throw std::invalid_argument("merge: observer types differ");
  at::NoGradGuard ng;
  min_val_.copy_(at::minimum(min_val_, o->min_val_));
  max_val_.copy_(at::maximum(max_val_, o->max_val_));
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

std::pair<at::Tensor, at::Tensor> PerChannelMinMaxObserver::channel_aminmax(const at::Tensor& x_in) const {
  at::Tensor x = x_in.detach().to(at::kFloat);
  const int64_t axis = spec_.ch_axis < 0 ? spec_.ch_axis + x.dim() : spec_.ch_axis;
  if (axis < 0 || axis >= x.dim())
    throw DataError("per-channel observer of '" + tensor_name_ + "': channel axis " + std::to_string(spec_.ch_axis) +
                    " out of range for a tensor of rank " + std::to_string(x.dim()));
  std::vector<int64_t> perm(static_cast<size_t>(x.dim()));
  for (int64_t i = 0; i < x.dim(); ++i) perm[static_cast<size_t>(i)] = i;
  std::swap(perm[0], perm[static_cast<size_t>(axis)]);
  at::Tensor y = at::flatten(x.permute(perm), 1);
  auto r = at::aminmax(y, 1);
  check_finite(std::get<0>(r), std::get<1>(r));
  return {std::get<0>(r), std::get<1>(r)};
}

at::Tensor PerChannelMinMaxObserver::forward(const at::Tensor& x_in) {
  if (x_in.numel() == 0) return x_in;
  at::NoGradGuard ng;
  auto [lo, hi] = channel_aminmax(x_in);
  const bool first = min_val_.numel() == 0;
  if (!first && min_val_.sizes() != lo.sizes())
    throw DataError("per-channel observer of '" + tensor_name_ + "': channel count changed from " +
                    std::to_string(min_val_.numel()) + " to " + std::to_string(lo.numel()));
  accumulate(min_val_, max_val_, lo, hi, first, c_);
  return x_in;
}

void PerChannelMinMaxObserver::merge(const ObserverBase& other) {
  const auto* o = dynamic_cast<const PerChannelMinMaxObserver*>(&other);
  if (!o) throw std::invalid_argument("merge: observer types differ");
  if (o->min_val_.numel() == 0) return;
  at::NoGradGuard ng;
  if (min_val_.numel() == 0) {
    min_val_.resize_(o->min_val_.sizes()).copy_(o->min_val_);
    max_val_.resize_(o->max_val_.sizes()).copy_(o->max_val_);
    return;
  }
  if (min_val_.sizes() != o->min_val_.sizes()) throw std::invalid_argument("merge: channel counts differ");
  min_val_.copy_(at::minimum(min_val_, o->min_val_));
  max_val_.copy_(at::maximum(max_val_, o->max_val_));
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

// --- HistogramObserver -----------------------------------------------------------

HistogramObserver::HistogramObserver(QuantSpec spec, Algorithm algorithm, AlgorithmOptions options, int64_t bins)
    : ObserverBase("HistogramObserver", std::move(spec)), algo_(algorithm), opts_(options), bins_(bins),
      chosen_(algorithm) {
  if (bins < 16) throw ConfigError("HistogramObserver: bins must be at least 16");
  if (spec_.per_channel) throw ConfigError("HistogramObserver is per-tensor only");
  min_val_ = register_buffer("min_val", scalar(kInf));
  max_val_ = register_buffer("max_val", scalar(-kInf));
  hist_ = register_buffer("histogram", at::zeros({bins}, at::TensorOptions().dtype(at::kDouble)));
  range_ = register_buffer("range", at::zeros({2}, at::TensorOptions().dtype(at::kDouble)));
}

void HistogramObserver::grow_to(double new_lo, double new_hi) {
  double* r = range_.data_ptr<double>();
  const double lo = r[0], w = r[1];
  const double hi = lo + static_cast<double>(bins_) * w;
  if (new_lo >= lo && new_hi <= hi) return;
  const double nl = std::min(new_lo, lo), nh = std::max(new_hi, hi);
  // Prepend `o` old bins, then merge k old bins into each new one: every new bin
  // is an exact sum of old bins.
  const int64_t o = static_cast<int64_t>(std::ceil((lo - nl) / w));
  const double start = lo - static_cast<double>(o) * w;
  int64_t k = std::max<int64_t>(1, static_cast<int64_t>(std::ceil((nh - start) / (static_cast<double>(bins_) * w))));
  while (start + static_cast<double>(bins_ * k) * w < nh) ++k;
  while ((bins_ - 1 + o) / k >= bins_) ++k;
  std::vector<double> old(hist_.data_ptr<double>(), hist_.data_ptr<double>() + bins_);
  double* h = hist_.data_ptr<double>();
  std::fill(h, h + bins_, 0.0);
  for (int64_t i = 0; i < bins_; ++i) h[(i + o) / k] += old[static_cast<size_t>(i)];
  r[0] = start;
  r[1] = w * static_cast<double>(k);
}

bool HistogramObserver::replay_range(float lo, float hi) {
  float* mn = min_val_.data_ptr<float>();
  float* mx = max_val_.data_ptr<float>();
  *mn = std::min(*mn, lo);
  *mx = std::max(*mx, hi);
  double* r = range_.data_ptr<double>();
  if (r[1] <= 0) {
    double span = static_cast<double>(hi) - static_cast<double>(lo);
    if (span <= 0) span = std::max(std::abs(static_cast<double>(lo)), 1.0) * 1e-6;
    r[0] = lo;
    r[1] = span / static_cast<double>(bins_);
  } else {
    grow_to(lo, hi);
  }
  return true;
}

void HistogramObserver::observe(const float* data, int64_t n) {
  if (n <= 0) return;
  // Pass 1 (vectorised, both threads): min, max and a non-finite flag (exponent all ones).
  float lo = std::numeric_limits<float>::infinity(), hi = -std::numeric_limits<float>::infinity();
  uint32_t nonfinite = 0;
#pragma omp parallel for simd reduction(min : lo) reduction(max : hi) reduction(| : nonfinite) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float x = data[i];
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    nonfinite |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    lo = x < lo ? x : lo;
    hi = x > hi ? x : hi;
  }
  if (nonfinite) throw DataError("observed tensor '" + (tensor_name_.empty() ? std::string("?") : tensor_name_) + "' contains NaN or Inf");
  replay_range(lo, hi);
  last_lo_ = lo;
  last_hi_ = hi;
  has_last_ = true;
  const double* r = range_.data_ptr<double>();
  // Pass 2: counts into per-thread integer histograms (four interleaved copies per
  // thread, so consecutive equal bins do not serialise on one counter), then summed.
  const double start = r[0], inv = 1.0 / r[1];
  const int64_t last = bins_ - 1;
  const int threads = n > 65536 ? omp_get_max_threads() : 1;
  std::vector<uint32_t> part(static_cast<size_t>(threads) * 4 * static_cast<size_t>(bins_), 0u);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    uint32_t* h = part.data() + static_cast<size_t>(t) * 4 * static_cast<size_t>(bins_);
    const int64_t b0 = n * t / nt, b1 = n * (t + 1) / nt;
    int64_t i = b0;
    for (; i + 4 <= b1; i += 4)
      for (int64_t u = 0; u < 4; ++u) {
        int64_t b = static_cast<int64_t>((static_cast<double>(data[i + u]) - start) * inv);
        b = b < 0 ? 0 : (b > last ? last : b);
        ++h[u * bins_ + b];
      }
    for (; i < b1; ++i) {
      int64_t b = static_cast<int64_t>((static_cast<double>(data[i]) - start) * inv);
      b = b < 0 ? 0 : (b > last ? last : b);
      ++h[b];
    }
  }
  double* hist = hist_.data_ptr<double>();
  for (size_t c = 0; c < part.size() / static_cast<size_t>(bins_); ++c)
    for (int64_t b = 0; b < bins_; ++b) hist[b] += part[c * static_cast<size_t>(bins_) + static_cast<size_t>(b)];
}

at::Tensor HistogramObserver::forward(const at::Tensor& x_in) {
  if (x_in.numel() == 0) return x_in;
  at::NoGradGuard ng;
  at::Tensor x = x_in.detach().to(at::kFloat).contiguous();
  observe(x.data_ptr<float>(), x.numel());
  return x_in;
}

Histogram HistogramObserver::histogram() const {
  Histogram h;
  const double* r = range_.data_ptr<double>();
  h.lo = r[0];
  h.width = r[1];
  const double* c = hist_.data_ptr<double>();
  h.counts.assign(c, c + bins_);
  h.min = min_val_.item<float>();
  h.max = max_val_.item<float>();
  return h;
}

std::pair<at::Tensor, at::Tensor> HistogramObserver::clip_range() const {
  if (!has_data()) return min_max();
  auto r = quant::clip_range(histogram(), algo_, spec_, opts_, &chosen_);
  return {scalar(r.first), scalar(r.second)};
}

std::string HistogramObserver::algorithm() const {
  if (algo_ == Algorithm::kAuto) return std::string("auto:") + algorithm_name(chosen_);
  return algorithm_name(algo_);
}

void HistogramObserver::merge(const ObserverBase& other) {
  const auto* o = dynamic_cast<const HistogramObserver*>(&other);
  if (!o) throw std::invalid_argument("merge: observer types differ");
  if (!o->has_data()) return;
  Histogram oh = o->histogram();
  float* mn = min_val_.data_ptr<float>();
  float* mx = max_val_.data_ptr<float>();
  double* r = range_.data_ptr<double>();
  if (r[1] <= 0) {  // empty: take the other's grid as is
    hist_.copy_(o->hist_.size(0) == bins_ ? o->hist_ : at::zeros_like(hist_));
    if (o->hist_.size(0) == bins_) {
      range_.copy_(o->range_);
      *mn = oh.min;
      *mx = oh.max;
      return;
    }
    r[0] = oh.lo;
    r[1] = oh.width * static_cast<double>(oh.counts.size()) / static_cast<double>(bins_);
  }
  *mn = std::min(*mn, oh.min);
  *mx = std::max(*mx, oh.max);
  grow_to(oh.lo, oh.lo + oh.width * static_cast<double>(oh.counts.size()));
  const double lo = r[0], w = r[1];
  double* h = hist_.data_ptr<double>();
  auto snap = [](double v) {
    const double rv = std::round(v);
    return std::abs(v - rv) < 1e-7 ? rv : v;
  };
  for (size_t j = 0; j < oh.counts.size(); ++j) {
    const double c = oh.counts[j];
    if (c == 0) continue;
    const double fa = snap((oh.lo + static_cast<double>(j) * oh.width - lo) / w);
    const double fb = snap((oh.lo + static_cast<double>(j + 1) * oh.width - lo) / w);
    const int64_t b0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(fa)));
    const int64_t b1 = std::min<int64_t>(bins_ - 1, static_cast<int64_t>(std::ceil(fb)) - 1);
    if (b1 <= b0) {
      h[std::min<int64_t>(std::max<int64_t>(b0, 0), bins_ - 1)] += c;
      continue;
    }
    const double span = fb - fa;
    for (int64_t b = b0; b <= b1; ++b) {
      const double ov = std::min(fb, static_cast<double>(b + 1)) - std::max(fa, static_cast<double>(b));
      if (ov > 0) h[b] += c * ov / span;
    }
  }
}

void HistogramObserver::reset() {
  min_val_.fill_(kInf);
  max_val_.fill_(-kInf);
  hist_.zero_();
  range_.zero_();
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
