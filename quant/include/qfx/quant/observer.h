// Observers: modules that record statistics of the tensors flowing through them
// (torch.ao.quantization.observer), kept apart from the qparams computed from them.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "qfx/quant/algorithms.h"
#include "qfx/quant/qparams.h"
#include "qfx/stats/histogram.h"
#include "qfx/stats/statistic.h"

namespace qfx::quant {

/// One tensor's statistics, taken by `ObserverBase::defer` against the observer's
/// state at that time and applied later by `commit` (stats::DeferredObservation).
/// Distributed calibration uses it: a rank observes its batch while the values are
/// still in cache, before the batches that come earlier in the single-process order
/// are replayed, and the result is still exactly what `forward` at commit time would
/// have recorded.
using DeferredObservation = stats::DeferredObservation;

/// Base of every observer. `forward(x)` records statistics of `x` (no gradient)
/// and returns `x` unchanged; `calculate_qparams()` turns them into qparams for
/// `spec()`. Statistics live in buffers, so `torch::save`/`load` and
/// `save_statistics` carry them. The arithmetic is the libtorch-free statistics
/// library's (qfx/stats), which the runtime's taps share: calibration feeds
/// observers through taps with `observe`, QAT through `forward`.
class ObserverBase : public torch::nn::Module {
 public:
  /// `type_name`: the torch.ao class name ("MinMaxObserver").
  ObserverBase(const std::string& type_name, QuantSpec spec);
  /// Records statistics of `x` (any shape; per-channel observers need
  /// `x.dim() > spec().ch_axis`): `observe` on its float32 values, or
  /// `observe_on_device` for a tensor that is not on the CPU. Returns `x`.
  /// Throws `qfx::DataError` naming `tensor_name()` if `x` holds NaN or Inf.
  virtual at::Tensor forward(const at::Tensor& x);
  /// Records statistics of `x` on whatever device it is (a CUDA tensor in QAT with
  /// `training.device: cuda`). The min/max observers reduce it there with ATen
  /// (aminmax, or amin / amax over all but the channel axis) and fold the few results
  /// into their host statistics; min and max are exact on any device, so the
  /// statistics equal `observe`'s on the same values, as do the errors (DataError
  /// naming `tensor_name()` on NaN or Inf). HistogramObserver reduces min and max
  /// there too and counts on the GPU or the host (see there). This base version copies
  /// `x` to the host and `observe`s it.
  virtual void observe_on_device(const at::Tensor& x);
  /// Statistics stay on the host whatever device the model moves to (the observers'
  /// arithmetic is the host statistics library's): moving an observer is a no-op.
  using torch::nn::Module::to;
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;
  /// Records statistics of a float32 tensor as a runtime tap hands it (any layout
  /// the view describes; its `name` is ignored for `tensor_name()`). Same statistics
  /// and errors as `forward`.
  virtual void observe(const stats::FloatView& v) = 0;
  /// Observed min and max: 0-dim (per-tensor) or [C] (per-channel) float tensors;
  /// +inf/-inf before anything was observed.
  virtual std::pair<at::Tensor, at::Tensor> min_max() const = 0;
  /// The clipping range qparams are computed from (min/max unless an algorithm
  /// over a histogram chooses otherwise).
  virtual std::pair<at::Tensor, at::Tensor> clip_range() const { return min_max(); }
  /// qparams for `spec()` from `clip_range()` (see `compute_qparams`). Before any
  /// data, returns scale 1, zero_point 0 (torch.ao's default).
  virtual QParams calculate_qparams() const;
  /// Folds another observer's statistics (same class and spec) into this one, as
  /// if it had seen that data too. Throws ArgumentError on a mismatch.
  virtual void merge(const ObserverBase& other) = 0;
  /// Forgets all statistics.
  virtual void reset() = 0;
  /// Distributed calibration (lockstep replay): updates the statistics that
  /// depend on the order of batches (the running or moving-average range, the
  /// histogram's grid and exact extremes) as `forward` would for a batch whose
  /// min and max are `lo` and `hi`, without counting its values. Returns false
  /// where that is not possible (per-channel observers: their ranks' statistics
  /// are merged afterwards by all_reduce_observers instead).
  virtual bool replay_range(float lo, float hi) {
    (void)lo, (void)hi;
    return false;
  }
  /// Distributed calibration: computes `x`'s statistics into `out` without changing
  /// the observer; `commit(*out)` later records them as `forward(x)` would then,
  /// even if other batches were recorded or replayed in between. Returns false
  /// where that is not possible (the caller keeps a copy of `x` and calls
  /// `forward` later): per-channel observers, and a histogram without a grid yet
  /// or whose grid `x` would grow more than 64-fold. Throws DataError on NaN/Inf.
  virtual bool defer(const at::Tensor& x, DeferredObservation* out) const {
    (void)x, (void)out;
    return false;
  }
  /// Records a `defer`red observation (see there). Throws InternalError if this
  /// observer cannot (it never deferred one).
  virtual void commit(const DeferredObservation& d);
  /// True once some data was observed.
  bool has_data() const;
  /// The quantization target.
  const QuantSpec& spec() const { return spec_; }
  /// Retargets the observer to `spec` (same granularity): the statistics stay and
  /// calculate_qparams() answers for the new range (auto_fallback's int16 move).
  /// Throws ConfigError if `spec` changes per-tensor to per-channel or back.
  void set_spec(const QuantSpec& spec);
  /// Name used in errors and reports (the observed tensor's node name).
  const std::string& tensor_name() const { return tensor_name_; }
  void set_tensor_name(std::string n) { tensor_name_ = std::move(n); }
  /// The algorithm used by `clip_range()` ("minmax" for non-histogram observers).
  virtual std::string algorithm() const { return "minmax"; }

 protected:
  QuantSpec spec_;
  std::string tensor_name_;
};

/// Running min/max over everything seen (torch.ao MinMaxObserver). Per-tensor.
class MinMaxObserver : public ObserverBase {
 public:
  explicit MinMaxObserver(QuantSpec spec);
  void observe(const stats::FloatView& v) override;
  void observe_on_device(const at::Tensor& x) override;
  std::pair<at::Tensor, at::Tensor> min_max() const override { return {min_val_, max_val_}; }
  void merge(const ObserverBase& other) override;
  bool replay_range(float lo, float hi) override;
  bool defer(const at::Tensor& x, DeferredObservation* out) const override;
  void commit(const DeferredObservation& d) override;
  void reset() override;
  /// Moving-average constant c (0: running min/max).
  double averaging_constant() const { return c_; }

 protected:
  MinMaxObserver(const std::string& type_name, QuantSpec spec);
  at::Tensor min_val_, max_val_;
  double c_ = 0.0;  ///< moving-average constant; 0: running min/max
};

/// Exponential moving average of per-batch min/max (torch.ao
/// MovingAverageMinMaxObserver): m <- m + c * (batch_m - m), first batch taken as is.
class MovingAverageMinMaxObserver : public MinMaxObserver {
 public:
  /// `averaging_constant`: c in (0, 1], torch.ao's default 0.01.
  explicit MovingAverageMinMaxObserver(QuantSpec spec, double averaging_constant = 0.01);
};

/// Per-channel running min/max along `spec.ch_axis` (torch.ao PerChannelMinMaxObserver).
class PerChannelMinMaxObserver : public ObserverBase {
 public:
  explicit PerChannelMinMaxObserver(QuantSpec spec);
  void observe(const stats::FloatView& v) override;
  void observe_on_device(const at::Tensor& x) override;
  std::pair<at::Tensor, at::Tensor> min_max() const override;
  void merge(const ObserverBase& other) override;
  void reset() override;
  /// Moving-average constant c (0: running min/max).
  double averaging_constant() const { return c_; }

 protected:
  PerChannelMinMaxObserver(const std::string& type_name, QuantSpec spec);
  /// Folds one observation's per-channel extremes into the statistics.
  void fold_channels(const std::vector<float>& lo, const std::vector<float>& hi);
  at::Tensor min_val_, max_val_;  // [C]; empty before data
  double c_ = 0.0;                // moving-average constant; 0: running min/max
};

/// Per-channel moving average (torch.ao MovingAveragePerChannelMinMaxObserver).
class MovingAveragePerChannelMinMaxObserver : public PerChannelMinMaxObserver {
 public:
  explicit MovingAveragePerChannelMinMaxObserver(QuantSpec spec, double averaging_constant = 0.01);
};

/// A `bins`-bin histogram of the observed values (default 2048) plus the exact
/// min/max: stats::LatticeHistogram (qfx/stats/histogram.h), whose grid grows by
/// whole bins (each new bin the exact sum of old ones, unlike torch.ao's
/// interpolating HistogramObserver). The clipping range comes from `algorithm`
/// (minmax, percentile, entropy/KL, mse, auto) over the histogram. Per-tensor only.
class HistogramObserver : public ObserverBase {
 public:
  HistogramObserver(QuantSpec spec, Algorithm algorithm = Algorithm::kEntropy, AlgorithmOptions options = {},
                    int64_t bins = 2048);
  void observe(const stats::FloatView& v) override;
  /// Min and max reduced where `x` lives; with `count_on_gpu()` a CUDA tensor is
  /// counted in place on the GPU (never copied to the host), otherwise its values are
  /// copied to the host and counted as `observe` counts them. Same counts, grid and
  /// errors as `observe` on the same values.
  void observe_on_device(const at::Tensor& x) override;
  std::pair<at::Tensor, at::Tensor> min_max() const override { return {min_val_, max_val_}; }
  std::pair<at::Tensor, at::Tensor> clip_range() const override;
  /// Merges another histogram: exact when its bin edges fall on this one's grid
  /// (e.g. both grew from the same first batch); otherwise each of its bins is
  /// spread over the bins it overlaps in proportion to the overlap.
  bool replay_range(float lo, float hi) override;
  bool defer(const at::Tensor& x, DeferredObservation* out) const override;
  void commit(const DeferredObservation& d) override;
  void merge(const ObserverBase& other) override;
  void reset() override;
  std::string algorithm() const override;
  /// The statistics as a plain histogram.
  Histogram histogram() const;
  /// The algorithm actually chosen by the last `clip_range()` (kAuto resolves).
  Algorithm chosen_algorithm() const { return chosen_; }
  /// The configured algorithm (kAuto stays kAuto), its options and the bin count.
  Algorithm configured_algorithm() const { return algo_; }
  /// Replaces the configured algorithm (ptq.range_search); the statistics stay.
  /// The next `clip_range()` uses it.
  void set_algorithm(Algorithm a) { algo_ = chosen_ = a; }
  const AlgorithmOptions& options() const { return opts_; }
  int64_t bins() const { return bins_; }
  /// Counts observed values on the GPU (runtime::cuda_lattice_histogram; calibrate
  /// sets it for CalibrateOptions::device cuda) instead of the CPU: the same bin rule,
  /// so the same counts, min, max and errors. Observations above 2^32 values count on
  /// the CPU. `observe` then throws ExecutionError where CUDA is unavailable.
  void set_count_on_gpu(bool on) { gpu_ = on; }
  bool count_on_gpu() const { return gpu_; }

 private:
  /// The buffers below as the lattice's state.
  stats::HistogramBuffers buffers() const;
  Algorithm algo_;
  AlgorithmOptions opts_;
  int64_t bins_;
  at::Tensor min_val_, max_val_;  // exact extremes (0-dim float)
  at::Tensor hist_;               // [bins] float64 counts
  at::Tensor range_;              // [2] float64: lo, width
  stats::LatticeHistogram lattice_;
  mutable Algorithm chosen_;
  bool gpu_ = false;  // set_count_on_gpu
};

/// Constant qparams for ops with a known output range (sigmoid, tanh, softmax,
/// hardsigmoid), as torch.ao FixedQParamsObserver: the range [lo, hi] maps onto
/// the full integer range, scale = (hi - lo) / (quant_max - quant_min + 1).
class FixedQParamsObserver : public ObserverBase {
 public:
  FixedQParamsObserver(QuantSpec spec, float lo, float hi);
  at::Tensor forward(const at::Tensor& x) override { return x; }
  void observe(const stats::FloatView&) override {}
  std::pair<at::Tensor, at::Tensor> min_max() const override;
  void merge(const ObserverBase&) override {}
  void reset() override {}
  std::string algorithm() const override { return "fixed"; }
  /// The fixed qparams.
  QParams fixed_qparams() const;
  QParams calculate_qparams() const override { return fixed_qparams(); }
  /// The fixed range [lo, hi].
  std::pair<float, float> range() const { return {lo_, hi_}; }

 private:
  float lo_, hi_;
};

/// Which observer a qconfig asks for.
enum class ObserverKind { kMinMax, kMovingAverageMinMax, kPerChannelMinMax, kMovingAveragePerChannelMinMax, kHistogram };
/// "minmax", "moving_average_minmax", "per_channel_minmax",
/// "moving_average_per_channel_minmax", "histogram".
const char* observer_kind_name(ObserverKind k);
/// Parses the names above. Throws qfx::ConfigError.
ObserverKind parse_observer_kind(const std::string& s);

/// Everything needed to build one observer.
struct ObserverSpec {
  ObserverKind kind = ObserverKind::kMinMax;
  QuantSpec spec;
  Algorithm algorithm = Algorithm::kMinMax;
  AlgorithmOptions options;
  double averaging_constant = 0.01;
  int64_t bins = 2048;
};

/// Builds the observer `s` describes. Throws qfx::ConfigError if the kind
/// and spec disagree (per-channel kind with a per-tensor spec, a histogram
/// algorithm other than minmax on a non-histogram observer).
std::shared_ptr<ObserverBase> make_observer(const ObserverSpec& s);

}  // namespace qfx::quant
