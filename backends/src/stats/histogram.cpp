// The lattice histogram (qfx/stats/histogram.h): growing the grid by whole bins,
// deferred observations, merging; and the runtime's histogram tap.
#include "qfx/stats/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fold.h"
#include "histogram_count.h"
#include "qfx/error.h"
#include "qfx/stats/min_max.h"

namespace qfx::stats {
namespace {
using detail::Grid;
constexpr float kInf = std::numeric_limits<float>::infinity();
// The grid's cells (bins x K) stay below this, so every cell edge off + b * K of
// the grid is an exact integer in a double (beyond it, a new lattice starts).
constexpr int64_t kMaxGridCells = int64_t{1} << 50;
// A deferred observation counts on the current grid's cells; it gives up (the
// caller keeps a copy) where the tensor spans more than this many grids.
constexpr int64_t kDeferSpan = 64;

// One counting pass on the CPU or, where asked and possible, the GPU.
void count_pass_on(bool on_gpu, const float* data, int64_t n, const Grid& g, int64_t bins, detail::Partials* p) {
  if (on_gpu && n < (int64_t{1} << 32)) detail::gpu_count_pass(data, n, g, bins, p);
  else detail::count_pass(data, n, g, bins, p);
}
}  // namespace

void LatticeHistogram::write_range(const HistogramBuffers& b) {
  b.range[0] = wrote_lo_ = base_lo_ + static_cast<double>(off_) * base_w_;
  b.range[1] = wrote_w_ = base_w_ * static_cast<double>(k_);
}

void LatticeHistogram::sync_lattice(const HistogramBuffers& b) {
  const double* r = b.range;
  if (r[1] <= 0 || (base_w_ > 0 && r[0] == wrote_lo_ && r[1] == wrote_w_)) return;
  base_lo_ = r[0];
  base_w_ = r[1];
  off_ = 0;
  k_ = 1;
  write_range(b);
}

void LatticeHistogram::grow_to(const HistogramBuffers& b, double new_lo, double new_hi) {
  sync_lattice(b);
  const int64_t bins = b.bins;
  const double lo = b.range[0], w = b.range[1];
  const double hi = lo + static_cast<double>(bins) * w;
  if (new_lo >= lo && new_hi <= hi) return;
  const double nl = std::min(new_lo, lo), nh = std::max(new_hi, hi);
  // Prepend `o` old bins, then merge k old bins into each new one: every new bin
  // is an exact sum of old bins. The new grid's edges are computed as write_range
  // writes them, so it covers [nl, nh] as written.
  auto start_of = [&](int64_t o) { return base_lo_ + static_cast<double>(off_ - o * k_) * base_w_; };
  int64_t o = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((lo - nl) / w)));
  while (start_of(o) > nl) ++o;
  const double start = start_of(o);
  int64_t k = std::max<int64_t>(1, static_cast<int64_t>(std::ceil((nh - start) / (static_cast<double>(bins) * w))));
  while (start + static_cast<double>(bins) * (base_w_ * static_cast<double>(k_ * k)) < nh) ++k;
  while ((bins - 1 + o) / k >= bins) ++k;
  std::vector<double> old(b.counts, b.counts + bins);
  std::fill(b.counts, b.counts + bins, 0.0);
  for (int64_t i = 0; i < bins; ++i) b.counts[(i + o) / k] += old[static_cast<size_t>(i)];
  if (k_ <= kMaxGridCells / bins / k) {
    off_ -= o * k_;
    k_ *= k;
  } else {  // the range grew about 2^50 / bins-fold since the lattice was set: a new lattice on this grid
    base_w_ *= static_cast<double>(k_) * static_cast<double>(k);
    base_lo_ = start;
    off_ = 0;
    k_ = 1;
  }
  write_range(b);
}

void LatticeHistogram::replay_range(const HistogramBuffers& b, float lo, float hi) {
  *b.min = std::min(*b.min, lo);
  *b.max = std::max(*b.max, hi);
  if (b.range[1] <= 0) {
    double span = static_cast<double>(hi) - static_cast<double>(lo);
    if (span <= 0) span = std::max(std::abs(static_cast<double>(lo)), 1.0) * 1e-6;
    base_lo_ = lo;
    base_w_ = span / static_cast<double>(b.bins);
    off_ = 0;
    k_ = 1;
    write_range(b);
  } else {
    grow_to(b, lo, hi);
  }
}

void LatticeHistogram::observe_known_range(const HistogramBuffers& b, const float* data, int64_t n, float lo, float hi,
                                           CountOn where) {
  if (n <= 0) return;
  if (where != CountOn::kCpu && n >= (int64_t{1} << 32))
    throw ExecutionError("histogram: a GPU count takes fewer than 2^32 values, got " + std::to_string(n));
  sync_lattice(b);
  replay_range(b, lo, hi);
  thread_local detail::Partials p;
  const Grid g{base_lo_, 1.0 / base_w_, off_, k_};
  if (where == CountOn::kCpu) detail::count_pass(data, n, g, b.bins, &p);
  else detail::gpu_count_pass(data, n, g, b.bins, &p, /*resident=*/where == CountOn::kGpuResident);
  detail::add_partials(p, b.bins, b.counts);
}

void LatticeHistogram::observe(const HistogramBuffers& b, const float* data, int64_t n, const std::string& name,
                               bool on_gpu) {
  if (n <= 0) return;
  sync_lattice(b);
  thread_local detail::Partials p;  // its counters stay allocated from call to call
  if (base_w_ > 0) {
    // One pass: count on the current grid while scanning. Where the values need no
    // wider grid (most batches after the first), those counts are the result;
    // otherwise the grid grows and a second pass counts on it.
    const Grid before{base_lo_, 1.0 / base_w_, off_, k_};
    const double width = base_w_;
    count_pass_on(on_gpu, data, n, before, b.bins, &p);
    detail::throw_if_nonfinite(p.nonfinite != 0, name);
    replay_range(b, p.lo, p.hi);
    if (base_lo_ == before.lo && base_w_ == width && off_ == before.off && k_ == before.k) {
      detail::add_partials(p, b.bins, b.counts);
      return;
    }
  } else {
    float lo, hi;
    checked_min_max(data, n, name, &lo, &hi);
    replay_range(b, lo, hi);
  }
  const Grid g{base_lo_, 1.0 / base_w_, off_, k_};
  count_pass_on(on_gpu, data, n, g, b.bins, &p);
  detail::add_partials(p, b.bins, b.counts);
}

bool LatticeHistogram::defer(const HistogramBuffers& b, const float* data, int64_t n, const std::string& name,
                             DeferredObservation* out) const {
  out->empty = true;
  out->counts.clear();  // keeps its capacity: callers reuse one per observation
  if (n == 0) return true;
  const double* r = b.range;
  if (r[1] <= 0) return false;  // no grid yet: the first batch sets it
  float lo, hi;
  checked_min_max(data, n, name, &lo, &hi);
  // The lattice commit() will find: this one, or the current grid where the range
  // was set from outside since (as sync_lattice re-anchors it).
  const bool synced = base_w_ > 0 && r[0] == wrote_lo_ && r[1] == wrote_w_;
  Grid g = synced ? Grid{base_lo_, 1.0 / base_w_, off_, k_} : Grid{r[0], 1.0 / r[1], 0, 1};
  // The tensor's bins on the current grid, unclamped (up to kDeferSpan grids away);
  // their edge cells must stay exact integers in a double.
  const int64_t bins = b.bins;
  const double lim = static_cast<double>((kDeferSpan + 2) * bins);
  if (2.0 * lim * static_cast<double>(g.k) >= 0x1p52) return false;
  const double qlo = g.bin(lo, lim), qhi = g.bin(hi, lim);
  if (qlo < -static_cast<double>(kDeferSpan * bins) || qhi > static_cast<double>(kDeferSpan * bins) ||
      qhi - qlo >= static_cast<double>(kDeferSpan * bins))
    return false;
  // Count on the current grid's bins as cells, starting at the tensor's lowest.
  g.off += static_cast<int64_t>(qlo) * g.k;
  const int64_t cells = static_cast<int64_t>(qhi - qlo) + 1;
  out->counts.assign(static_cast<size_t>(cells), 0.0);
  detail::count(data, n, g, cells, out->counts.data());
  out->empty = false;
  out->lo = lo;
  out->hi = hi;
  out->base_lo = synced ? base_lo_ : r[0];
  out->base_width = synced ? base_w_ : r[1];
  out->off = g.off;
  out->k = g.k;
  return true;
}

void LatticeHistogram::commit(const HistogramBuffers& b, const DeferredObservation& d, const std::string& name) {
  if (d.empty) return;
  replay_range(b, d.lo, d.hi);
  // The grid only coarsened since defer: each of its bins is a union of d's cells.
  if (d.base_lo != base_lo_ || d.base_width != base_w_)
    throw DataError("histogram of '" + name + "': its range grew so far within one step of distributed calibration "
                    "(to 2^50 / bins times its first batch's) that its bin lattice restarted; calibrate in one process, or use "
                    "a minmax observer for this tensor");
  if (k_ % d.k != 0 || detail::floor_div(d.off - off_, d.k) * d.k != d.off - off_)
    throw InternalError("histogram of '" + name + "': a deferred observation does not lie on the current grid");
  for (size_t i = 0; i < d.counts.size(); ++i) {
    if (d.counts[i] == 0) continue;
    const int64_t bin = detail::floor_div(d.off + static_cast<int64_t>(i) * d.k - off_, k_);
    b.counts[std::min(std::max<int64_t>(bin, 0), b.bins - 1)] += d.counts[i];
  }
}

void LatticeHistogram::merge(const HistogramBuffers& b, double olo, double owidth, const double* ocounts, int64_t on,
                             float mn, float mx) {
  *b.min = std::min(*b.min, mn);
  *b.max = std::max(*b.max, mx);
  grow_to(b, olo, olo + owidth * static_cast<double>(on));
  const double lo = b.range[0], w = b.range[1];
  auto snap = [](double v) {
    const double rv = std::round(v);
    return std::abs(v - rv) < 1e-7 ? rv : v;
  };
  for (int64_t j = 0; j < on; ++j) {
    const double c = ocounts[j];
    if (c == 0) continue;
    const double fa = snap((olo + static_cast<double>(j) * owidth - lo) / w);
    const double fb = snap((olo + static_cast<double>(j + 1) * owidth - lo) / w);
    const int64_t b0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(fa)));
    const int64_t b1 = std::min<int64_t>(b.bins - 1, static_cast<int64_t>(std::ceil(fb)) - 1);
    if (b1 <= b0) {
      b.counts[std::min<int64_t>(std::max<int64_t>(b0, 0), b.bins - 1)] += c;
      continue;
    }
    const double span = fb - fa;
    for (int64_t i = b0; i <= b1; ++i) {
      const double ov = std::min(fb, static_cast<double>(i + 1)) - std::max(fa, static_cast<double>(i));
      if (ov > 0) b.counts[i] += c * ov / span;
    }
  }
}

// --- the histogram tap ---------------------------------------------------------------

Histogram::Histogram(int64_t bins) : fixed_(false), seen_min_(kInf), seen_max_(-kInf) {
  if (bins < 1) throw DataError("histogram taps need bins >= 1");
  counts.assign(static_cast<size_t>(bins), 0.0);
}

Histogram::Histogram(int64_t bins, float lo, float hi) : fixed_(true), seen_min_(kInf), seen_max_(-kInf) {
  if (bins < 1 || !(hi > lo)) throw DataError("histogram taps need bins >= 1 and hi > lo");
  counts.assign(static_cast<size_t>(bins), 0.0);
  range[0] = lo;
  range[1] = (static_cast<double>(hi) - static_cast<double>(lo)) / static_cast<double>(bins);
}

HistogramBuffers Histogram::buffers() {
  return HistogramBuffers{counts.data(), static_cast<int64_t>(counts.size()), range, &seen_min_, &seen_max_};
}

void Histogram::observe(const FloatView& v) {
  const int64_t n = v.numel();
  if (n == 0) return;
  if (fixed_) {  // one pass on the fixed grid: NaN in bin 0, outliers in the end bins
    thread_local detail::Partials p;
    const Grid g{range[0], 1.0 / range[1], 0, 1};
    detail::count_pass(v.data, n, g, static_cast<int64_t>(counts.size()), &p);
    detail::add_partials(p, static_cast<int64_t>(counts.size()), counts.data());
    seen_min_ = std::min(seen_min_, p.lo);
    seen_max_ = std::max(seen_max_, p.hi);
  } else {
    lattice_.observe(buffers(), v.data, n, v.name);
  }
  count += n;
  min = seen_min_;
  max = seen_max_;
}

}  // namespace qfx::stats
