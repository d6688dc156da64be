// The lattice histogram without libtorch: the quantization HistogramObserver's
// statistics (qfx/quant/observer.h) and the runtime's histogram taps.
//
// Binning is integer arithmetic on a lattice fixed by the first grid (start
// `base_lo`, cell width `base_width`): a value x lies in cell
// c = floor((x - base_lo) / base_width), and the current grid's bin b covers cells
// [off + b * K, off + (b + 1) * K). When new data falls outside the covered range the
// grid grows to an integer multiple of its bin width, aligned to the old bin edges,
// so each new bin is the exact sum of old bins (no interpolation, unlike torch.ao's
// HistogramObserver). A value's bin is then the same whether it is counted now or
// counted on an older grid and carried through the merges since. A grid of more than
// 2^50 cells starts a new lattice on the current grid. The bin rule is
// runtime::hd::HistogramLattice (arith_hd.h), which the GPU's count shares.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qfx/stats/statistic.h"

namespace qfx::stats {

/// One tensor's histogram statistics taken against a histogram's state at one time
/// and recorded later (LatticeHistogram::defer / commit; distributed calibration).
struct DeferredObservation {
  bool empty = true;     ///< the tensor had no elements (commit does nothing)
  float lo = 0, hi = 0;  ///< the tensor's min and max
  /// Histograms: counts[i] is the number of values in cells [off + i * k,
  /// off + (i + 1) * k) of the lattice (base_lo, base_width); empty for min/max.
  std::vector<double> counts;
  double base_lo = 0, base_width = 0;  ///< the lattice: start and cell width
  int64_t off = 0, k = 1;              ///< first cell of counts[0], cells per count
};

/// Where a histogram's state lives: a quantization observer's buffers, or a tap's own
/// vectors. `range[1] == 0` means no grid yet.
struct HistogramBuffers {
  double* counts = nullptr;  ///< [bins] float64 counts
  int64_t bins = 0;          ///< number of bins (>= 1)
  double* range = nullptr;   ///< [2]: the grid's start and bin width
  float* min = nullptr;      ///< exact minimum seen (+inf before data)
  float* max = nullptr;      ///< exact maximum seen (-inf before data)
};

/// The lattice of a growing `bins`-bin histogram (see the file comment), operating on
/// the state in a HistogramBuffers. The buffers may be rewritten from outside between
/// calls (a loaded statistics file, a merge): the lattice then restarts on their grid.
class LatticeHistogram {
 public:
  /// Adds the `n` values at `data`, growing the grid to cover them; `on_gpu` counts
  /// on the GPU (runtime::cuda_lattice_histogram: same bins, so the same counts) when
  /// n < 2^32. Throws qfx::DataError naming `name` if a value is NaN or Inf, and
  /// qfx::ExecutionError when `on_gpu` is set and CUDA is unavailable.
  void observe(const HistogramBuffers& b, const float* data, int64_t n, const std::string& name, bool on_gpu = false);
  /// Where `observe_known_range` counts: host values on the CPU, host values on the
  /// GPU (copied there), or values already in GPU memory (a CUDA tensor's data, for
  /// calibration on the GPU), which never come to the host.
  enum class CountOn { kCpu, kGpu, kGpuResident };
  /// `observe` for values whose exact min and max (finite; the caller refuses NaN and
  /// Inf) are known already, e.g. from a reduction where they live: the grid grows to
  /// [lo, hi] first, then one pass counts the values on it, `where` says. The counts,
  /// min, max and grid are `observe`'s on the same values (its grid after a pass is
  /// the one [lo, hi] gives). kGpu / kGpuResident need n < 2^32 and throw
  /// qfx::ExecutionError where CUDA is unavailable.
  void observe_known_range(const HistogramBuffers& b, const float* data, int64_t n, float lo, float hi, CountOn where);
  /// Updates min, max and the grid as observe would for values spanning [lo, hi],
  /// without counting them (distributed calibration's replay).
  void replay_range(const HistogramBuffers& b, float lo, float hi);
  /// Counts `data` against the current grid into `out` without changing anything;
  /// commit(out) later records it as observe would then. Returns false when the
  /// histogram has no grid yet or the values span more than 64 grids. Throws
  /// qfx::DataError naming `name` on NaN or Inf.
  bool defer(const HistogramBuffers& b, const float* data, int64_t n, const std::string& name,
             DeferredObservation* out) const;
  /// Records a deferred observation. Throws qfx::DataError if the lattice restarted
  /// since it was taken, qfx::InternalError if it does not lie on the grid.
  void commit(const HistogramBuffers& b, const DeferredObservation& d, const std::string& name);
  /// Folds another histogram (start `lo`, bin width `width`, `n` counts, extremes
  /// `mn` / `mx`) in: exact when its edges fall on this grid, otherwise each of its
  /// bins is spread over the bins it overlaps in proportion to the overlap.
  void merge(const HistogramBuffers& b, double lo, double width, const double* counts, int64_t n, float mn, float mx);
  /// Forgets the lattice (the caller clears the buffers).
  void reset() { base_w_ = 0; }

 private:
  void grow_to(const HistogramBuffers& b, double lo, double hi);
  void sync_lattice(const HistogramBuffers& b);
  void write_range(const HistogramBuffers& b);
  double base_lo_ = 0, base_w_ = 0;    // the lattice (base_w_ 0: none yet)
  int64_t off_ = 0, k_ = 1;            // the grid in lattice cells
  double wrote_lo_ = 0, wrote_w_ = 0;  // range as the lattice last wrote it
};

/// A histogram tap: `bins` bins that either grow as the quantization
/// HistogramObserver's do (the statistics calibration collects) or stay on the fixed
/// range [lo, hi) (values outside count in the end bins, NaN in bin 0; nothing is
/// refused). Also keeps the min, max (NaN skipped) and element count.
class Histogram : public Statistic {
 public:
  /// Growing histogram of `bins` (>= 1) bins; its first grid spans the first tensor.
  explicit Histogram(int64_t bins);
  /// Fixed-range histogram of `bins` bins over [lo, hi). Throws qfx::DataError unless
  /// bins >= 1 and hi > lo.
  Histogram(int64_t bins, float lo, float hi);
  void observe(const FloatView& v) override;
  std::vector<double> counts;   ///< [bins]
  double range[2] = {0, 0};     ///< the grid's start and bin width
  float min = 0, max = 0;       ///< over every element seen (0 before any)
  int64_t count = 0;            ///< elements seen

 private:
  HistogramBuffers buffers();
  bool fixed_;
  float seen_min_, seen_max_;
  LatticeHistogram lattice_;
};

}  // namespace qfx::stats
