// Statistics of float tensors, without libtorch: what the runtime's observer taps
// collect while a model runs and what the quantization observers (qfx/quant/observer.h)
// compute their ranges from. One implementation serves both, so calibration, which
// collects through taps, and `qfx bench`'s taps measure the same code.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace qfx::stats {

/// A float32 tensor as a statistic sees it: `data` holds numel(shape) contiguous
/// values, in the logical (row-major) order of `shape`, or, when `channels_last`,
/// with axis 1 moved innermost (the NHWC order of an NCHW `shape`). Valid only during
/// the call it is handed to.
struct FloatView {
  const float* data = nullptr;  ///< numel() float32 values, in the order described above
  std::vector<int64_t> shape;  ///< logical shape (NCHW for an image batch)
  bool channels_last = false;  ///< stored with axis 1 innermost
  std::string name;            ///< the tensor's name, for errors
  /// Number of elements: the product of `shape` (1 for a scalar).
  int64_t numel() const;
};

/// Something that accumulates statistics of the tensors it is shown (a runtime tap,
/// a quantization observer's sink). `observe` may be called from any thread, but
/// never concurrently for one object (the runtime serialises taps).
class Statistic {
 public:
  virtual ~Statistic() = default;
  /// Folds `v` into the statistics. Implementations throw qfx::DataError naming
  /// `v.name` for values they refuse (NaN or Inf where they must not occur).
  virtual void observe(const FloatView& v) = 0;
};

/// A Statistic that hands each view to a function (a tap whose statistics live
/// elsewhere: calibration's observers).
class CallbackStatistic : public Statistic {
 public:
  /// `f` receives each view `observe` is shown (on the observing thread).
  explicit CallbackStatistic(std::function<void(const FloatView&)> f) : f_(std::move(f)) {}
  void observe(const FloatView& v) override { f_(v); }

 private:
  std::function<void(const FloatView&)> f_;
};

}  // namespace qfx::stats
