// HistogramObserver (see observer.h): the observer's buffers as the state of a
// stats::LatticeHistogram (qfx/stats/histogram.h), which does the counting.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "float_view.h"
#include "qfx/error.h"
#include "qfx/quant/observer.h"

namespace qfx::quant {
namespace {
at::Tensor scalar(float v) { return at::full({}, v, at::TensorOptions().dtype(at::kFloat)); }
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

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

stats::HistogramBuffers HistogramObserver::buffers() const {
  return stats::HistogramBuffers{hist_.data_ptr<double>(), bins_, range_.data_ptr<double>(), min_val_.data_ptr<float>(),
                                 max_val_.data_ptr<float>()};
}

bool HistogramObserver::replay_range(float lo, float hi) {
  lattice_.replay_range(buffers(), lo, hi);
  return true;
}

void HistogramObserver::observe(const stats::FloatView& v) {
  lattice_.observe(buffers(), v.data, v.numel(), tensor_name_, gpu_);
}

void HistogramObserver::observe_on_device(const at::Tensor& x_in) {
  if (x_in.numel() == 0) return;
  at::NoGradGuard ng;
  const at::Tensor x = x_in.detach().to(at::kFloat).contiguous();
  float lo, hi;
  detail::checked_aminmax(x, tensor_name_, &lo, &hi);  // also completes x's producer on its stream
  using CountOn = stats::LatticeHistogram::CountOn;
  const bool gpu = gpu_ && x.numel() < (int64_t{1} << 32);
  const bool resident = gpu && x.is_cuda();
  const at::Tensor values = resident ? x : x.to(at::kCPU);
  lattice_.observe_known_range(buffers(), values.data_ptr<float>(), values.numel(), lo, hi,
                               resident ? CountOn::kGpuResident : (gpu ? CountOn::kGpu : CountOn::kCpu));
}

bool HistogramObserver::defer(const at::Tensor& x_in, DeferredObservation* out) const {
  if (x_in.numel() == 0) {
    *out = DeferredObservation{};
    return true;
  }
  at::NoGradGuard ng;
  const at::Tensor x = x_in.detach().to(at::kFloat).contiguous();
  return lattice_.defer(buffers(), x.data_ptr<float>(), x.numel(), tensor_name_, out);
}

void HistogramObserver::commit(const DeferredObservation& d) { lattice_.commit(buffers(), d, tensor_name_); }

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
  if (!o) throw ArgumentError("merge: observer types differ");
  if (!o->has_data()) return;
  Histogram oh = o->histogram();
  double* r = range_.data_ptr<double>();
  if (r[1] <= 0) {  // empty: take the other's grid as is
    hist_.copy_(o->hist_.size(0) == bins_ ? o->hist_ : at::zeros_like(hist_));
    if (o->hist_.size(0) == bins_) {
      range_.copy_(o->range_);
      *min_val_.data_ptr<float>() = oh.min;
      *max_val_.data_ptr<float>() = oh.max;
      return;
    }
    r[0] = oh.lo;
    r[1] = oh.width * static_cast<double>(oh.counts.size()) / static_cast<double>(bins_);
  }
  lattice_.merge(buffers(), oh.lo, oh.width, oh.counts.data(), static_cast<int64_t>(oh.counts.size()), oh.min, oh.max);
}

void HistogramObserver::reset() {
  min_val_.fill_(kInf);
  max_val_.fill_(-kInf);
  hist_.zero_();
  range_.zero_();
  lattice_.reset();
}

}  // namespace qfx::quant
