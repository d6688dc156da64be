// HistogramObserver (see observer.h): counting on the cell lattice, growing the
// grid by whole bins, deferred observations, merging.
#include <omp.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "qfx/error.h"
#include "qfx/runtime/arith_hd.h"
#include "qfx/runtime/cuda.h"
#include "qfx/quant/observer.h"

namespace qfx::quant {
namespace {

at::Tensor scalar(float v) { return at::full({}, v, at::TensorOptions().dtype(at::kFloat)); }
constexpr float kInf = std::numeric_limits<float>::infinity();
// The grid's cells (bins x K) stay below this, so every cell edge off + b * K of
// the grid is an exact integer in a double (beyond it, a new lattice starts).
constexpr int64_t kMaxGridCells = int64_t{1} << 50;
// A deferred observation counts on the current grid's cells; it gives up (the
// caller keeps a copy) where the tensor spans more than this many grids.
constexpr int64_t kDeferSpan = 64;

// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// Where values fall: runtime::hd::HistogramLattice (arith_hd.h), the bin rule the
// GPU's count (calibration.device: cuda) shares.
using Grid = runtime::hd::HistogramLattice;

// Folds `v` into a running min, max and NaN/Inf flag (exponent all ones), in a
// form the `omp simd` loops below vectorise.
__attribute__((always_inline)) inline void fold(float v, float& l, float& h, uint32_t& nf) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  nf |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  l = v < l ? v : l;
  h = v > h ? v : h;
}

// DataError naming the tensor if fold() flagged NaN or Inf.
void throw_if_nonfinite(uint32_t nonfinite, const std::string& name) {
  if (nonfinite) throw DataError("observed tensor '" + (name.empty() ? std::string("?") : name) + "' contains NaN or Inf");
}

// Min and max of `data`; DataError naming `name` on NaN or Inf (exponent all ones).
void scan(const float* data, int64_t n, const std::string& name, float* lo_out, float* hi_out) {
  float lo = kInf, hi = -kInf;
  uint32_t nonfinite = 0;
#pragma omp parallel for simd reduction(min : lo) reduction(max : hi) reduction(| : nonfinite) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) fold(data[i], lo, hi, nonfinite);
  throw_if_nonfinite(nonfinite, name);
  *lo_out = lo;
  *hi_out = hi;
}

// idx[j] = the bin of x[j] on `g`, clamped to [0, bins): Grid::bin's arithmetic
// with a truncating conversion, which vectorises (below bin 0 it may start one
// too high; the exact edge comparisons then give a bin <= 0, clamped to 0 all
// the same). Also folds the values into *lo / *hi and flags NaN or Inf in
// *nonfinite (scan's test), so one pass can both count and scan. Compiled for
// AVX-512, AVX2 and the baseline, chosen at run time.
__attribute__((target_clones("avx512f", "avx2", "default"))) void bin_indices(const float* x, int64_t m, const Grid& g,
                                                                               int64_t bins, int32_t* idx, float* lo,
                                                                               float* hi, uint32_t* nonfinite) {
  const double glo = g.lo, inv = g.inv, offd = static_cast<double>(g.off), kd = static_cast<double>(g.k);
  const double invk = 1.0 / kd, cap = static_cast<double>(bins), last = static_cast<double>(bins - 1);
  float l = *lo, h = *hi;
  uint32_t nf = *nonfinite;
#pragma omp simd reduction(min : l) reduction(max : h) reduction(| : nf)
  for (int64_t j = 0; j < m; ++j) {
    const float v = x[j];
    fold(v, l, h, nf);
    const double t = (static_cast<double>(v) - glo) * inv;
    double e = (t - offd) * invk;
    e = e > cap ? cap : e;  // one select per statement: what if-conversion vectorises
    e = e >= -1.0 ? e : -1.0;  // NaN too (the caller throws for it; no index may go astray first)
    double b = static_cast<double>(static_cast<int32_t>(e));
    const double edge = offd + b * kd;
    const double down = t < edge ? 1.0 : 0.0;
    const double up = t >= edge + kd ? 1.0 : 0.0;
    b = b - down + up;
    b = b < 0.0 ? 0.0 : b;
    b = b > last ? last : b;
    idx[j] = static_cast<int32_t>(b);
  }
  *lo = l;
  *hi = h;
  *nonfinite = nf;
}

// The float shortcut of bin_indices: bins estimated in float, exact wherever the
// estimate is farther than `eps` (in bins) from an interior bin edge, because its
// error is below eps / 2 (see FloatGrid). Values nearer an edge get
// idx = -1, for the caller to bin exactly with Grid::bin (under 1 % of them).
struct FloatGrid {
  bool ok = false;  // false: the float error bound is too coarse; count in doubles
  float lo = 0, inv = 0, eps = 0;  // bin 0's start, bins per unit, the margin
  FloatGrid(const Grid& g, int64_t bins) {
    const double lo0 = g.lo + static_cast<double>(g.off) / g.inv, invb = g.inv / static_cast<double>(g.k);
    // e = (x - lo) * inv in float against the real value, for 0 <= e <= bins: lo
    // rounded to float shifts it by <= 2^-24 |lo| inv; the rounding of inv, of the
    // difference and of the product scale it by <= (1 + 2^-24)^3. So |error| <=
    // 2^-24 (|lo| inv + 3 bins) (+ O(2^-48)); the lattice's doubles are within
    // 2^-52 of the real value. eps is twice the bound.
    eps = static_cast<float>(0x1p-23 * (std::abs(lo0) * invb + 3.0 * static_cast<double>(bins)) + 0x1p-40);
    ok = eps <= 0x1p-6 && std::isfinite(lo0) && invb > 0 && std::isfinite(invb) && bins < (int64_t{1} << 22);
    lo = static_cast<float>(lo0);
    inv = static_cast<float>(invb);
  }
};

__attribute__((target_clones("avx512f", "avx2", "default"))) void float_bin_indices(const float* x, int64_t m,
                                                                                     const FloatGrid& g, int64_t bins,
                                                                                     int32_t* idx, float* lo, float* hi,
                                                                                     uint32_t* nonfinite) {
  const float glo = g.lo, inv = g.inv, eps = g.eps, flast = static_cast<float>(bins - 1);
  float l = *lo, h = *hi;
  uint32_t nf = *nonfinite;
#pragma omp simd reduction(min : l) reduction(max : h) reduction(| : nf)
  for (int64_t j = 0; j < m; ++j) {
    const float v = x[j];
    fold(v, l, h, nf);
    // The bins of e - eps and e + eps, both clamped to [0, bins - 1]: they differ
    // exactly when an interior edge lies within eps of e (NaN: bin 0 for both).
    const float e = (v - glo) * inv;
    float a = e - eps, c = e + eps;
    a = a >= 0.0f ? a : 0.0f;
    a = a < flast ? a : flast;
    c = c >= 0.0f ? c : 0.0f;
    c = c < flast ? c : flast;
    const int32_t ba = static_cast<int32_t>(a), bc = static_cast<int32_t>(c);
    idx[j] = ba == bc ? ba : -1;
  }
  *lo = l;
  *hi = h;
  *nonfinite = nf;
}

// One counting pass: per-thread integer counts (four interleaved copies where
// they are small, so consecutive equal bins do not serialise on one counter),
// and the values' min, max and NaN/Inf flag from the same pass.
struct Partials {
  std::vector<uint32_t> part;  // [threads * copies * bins]; each thread's total in its first copy
  int threads = 1;
  float lo = kInf, hi = -kInf;
  uint32_t nonfinite = 0;
};

void count_pass(const float* data, int64_t n, const Grid& g, int64_t bins, Partials* p) {
  const int threads = n > 65536 ? std::min(omp_get_max_threads(), 256) : 1;
  const int64_t copies = bins <= 4096 ? 4 : 1;
  p->part.resize(static_cast<size_t>(threads * copies * bins));
  p->threads = threads;
  const FloatGrid fg(g, bins);
  // Values the float shortcut leaves are binned by hd::HistogramLattice::counted_bin.
  float tlo[256], thi[256];
  uint32_t tnf[256];
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    uint32_t* h = p->part.data() + static_cast<size_t>(t * copies * bins);
    std::fill(h, h + copies * bins, 0u);  // each thread its own, while in its cache
    const int64_t b0 = n * t / nt, b1 = n * (t + 1) / nt;
    tlo[t] = kInf;
    thi[t] = -kInf;
    tnf[t] = 0;
    int32_t idx[512];
    for (int64_t i = b0; i < b1; i += 512) {
      const int64_t m = std::min<int64_t>(512, b1 - i);
      if (fg.ok)
        float_bin_indices(data + i, m, fg, bins, idx, &tlo[t], &thi[t], &tnf[t]);
      else
        bin_indices(data + i, m, g, bins, idx, &tlo[t], &thi[t], &tnf[t]);
      // Values the float shortcut left (idx -1, beside a bin edge): the lattice's bin.
      auto exact = [&](int64_t j) {
        if (idx[j] < 0) idx[j] = g.counted_bin(data[i + j], bins);
      };
      int64_t j = 0;
      if (copies == 4)
        for (; j + 4 <= m; j += 4) {
          if ((idx[j] | idx[j + 1] | idx[j + 2] | idx[j + 3]) < 0)
            for (int64_t q = j; q < j + 4; ++q) exact(q);
          ++h[idx[j]];
          ++h[bins + idx[j + 1]];
          ++h[2 * bins + idx[j + 2]];
          ++h[3 * bins + idx[j + 3]];
        }
      for (; j < m; ++j) {
        exact(j);
        ++h[idx[j]];
      }
    }
    for (int64_t c = 1; c < copies; ++c)  // this thread's copies into its first
      for (int64_t b = 0; b < bins; ++b) h[b] += h[c * bins + b];
  }
  for (int t = 0; t < threads; ++t) {
    p->lo = std::min(p->lo, tlo[t]);
    p->hi = std::max(p->hi, thi[t]);
    p->nonfinite |= tnf[t];
  }
}

// Adds the partial counts (each thread's first copy) into counts[0, bins).
void add_partials(const Partials& p, int64_t bins, double* counts) {
  const size_t per_thread = p.part.size() / static_cast<size_t>(p.threads);
  for (size_t t = 0; t < static_cast<size_t>(p.threads); ++t)
    for (int64_t b = 0; b < bins; ++b) counts[b] += p.part[t * per_thread + static_cast<size_t>(b)];
}

// Adds to counts[0, bins) how many values of `data` fall in each bin of `g`, the
// bins clamped to that range.
void count(const float* data, int64_t n, const Grid& g, int64_t bins, double* counts) {
  Partials p;
  count_pass(data, n, g, bins, &p);
  add_partials(p, bins, counts);
}

// count_pass on the GPU (the same bin rule, hd::HistogramLattice::counted_bin): one
// partial, the counts of all values.
void gpu_count_pass(const float* data, int64_t n, const Grid& g, int64_t bins, Partials* p) {
  std::vector<double> c(static_cast<size_t>(bins), 0.0);
  bool nonfinite = false;
  runtime::cuda_lattice_histogram(data, n, g, bins, c.data(), &p->lo, &p->hi, &nonfinite);
  p->threads = 1;
  p->part.assign(c.begin(), c.end());
  p->nonfinite = nonfinite;
}

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

void HistogramObserver::write_range() {
  double* r = range_.data_ptr<double>();
  r[0] = wrote_lo_ = base_lo_ + static_cast<double>(off_) * base_w_;
  r[1] = wrote_w_ = base_w_ * static_cast<double>(k_);
}

void HistogramObserver::sync_lattice() {
  const double* r = range_.data_ptr<double>();
  if (r[1] <= 0 || (base_w_ > 0 && r[0] == wrote_lo_ && r[1] == wrote_w_)) return;
  base_lo_ = r[0];
  base_w_ = r[1];
  off_ = 0;
  k_ = 1;
  write_range();
}

void HistogramObserver::grow_to(double new_lo, double new_hi) {
  sync_lattice();
  const double* r = range_.data_ptr<double>();
  const double lo = r[0], w = r[1];
  const double hi = lo + static_cast<double>(bins_) * w;
  if (new_lo >= lo && new_hi <= hi) return;
  const double nl = std::min(new_lo, lo), nh = std::max(new_hi, hi);
  // Prepend `o` old bins, then merge k old bins into each new one: every new bin
  // is an exact sum of old bins. The new grid's edges are computed as write_range
  // writes them, so it covers [nl, nh] as written.
  auto start_of = [&](int64_t o) { return base_lo_ + static_cast<double>(off_ - o * k_) * base_w_; };
  int64_t o = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((lo - nl) / w)));
  while (start_of(o) > nl) ++o;
  const double start = start_of(o);
  int64_t k = std::max<int64_t>(1, static_cast<int64_t>(std::ceil((nh - start) / (static_cast<double>(bins_) * w))));
  while (start + static_cast<double>(bins_) * (base_w_ * static_cast<double>(k_ * k)) < nh) ++k;
  while ((bins_ - 1 + o) / k >= bins_) ++k;
  std::vector<double> old(hist_.data_ptr<double>(), hist_.data_ptr<double>() + bins_);
  double* h = hist_.data_ptr<double>();
  std::fill(h, h + bins_, 0.0);
  for (int64_t i = 0; i < bins_; ++i) h[(i + o) / k] += old[static_cast<size_t>(i)];
  if (k_ <= kMaxGridCells / bins_ / k) {
    off_ -= o * k_;
    k_ *= k;
  } else {  // the range grew about 2^50 / bins-fold since the lattice was set: a new lattice on this grid
    base_w_ *= static_cast<double>(k_) * static_cast<double>(k);
    base_lo_ = start;
    off_ = 0;
    k_ = 1;
  }
  write_range();
}

bool HistogramObserver::replay_range(float lo, float hi) {
  float* mn = min_val_.data_ptr<float>();
  float* mx = max_val_.data_ptr<float>();
  *mn = std::min(*mn, lo);
  *mx = std::max(*mx, hi);
  const double* r = range_.data_ptr<double>();
  if (r[1] <= 0) {
    double span = static_cast<double>(hi) - static_cast<double>(lo);
    if (span <= 0) span = std::max(std::abs(static_cast<double>(lo)), 1.0) * 1e-6;
    base_lo_ = lo;
    base_w_ = span / static_cast<double>(bins_);
    off_ = 0;
    k_ = 1;
    write_range();
  } else {
    grow_to(lo, hi);
  }
  return true;
}

void HistogramObserver::observe(const float* data, int64_t n) {
  if (n <= 0) return;
  sync_lattice();
  if (base_w_ > 0) {
    // One pass: count on the current grid while scanning. Where the values need no
    // wider grid (most batches after the first), those counts are the result;
    // otherwise the grid grows and a second pass counts on it.
    const Grid before{base_lo_, 1.0 / base_w_, off_, k_};
    const double width = base_w_;
    Partials p;
    if (gpu_ && n < (int64_t{1} << 32)) gpu_count_pass(data, n, before, bins_, &p);
    else count_pass(data, n, before, bins_, &p);
    throw_if_nonfinite(p.nonfinite, tensor_name_);
    replay_range(p.lo, p.hi);
    if (base_lo_ == before.lo && base_w_ == width && off_ == before.off && k_ == before.k) {
      add_partials(p, bins_, hist_.data_ptr<double>());
      return;
    }
  } else {
    float lo, hi;
    scan(data, n, tensor_name_, &lo, &hi);
    replay_range(lo, hi);
  }
  const Grid g{base_lo_, 1.0 / base_w_, off_, k_};
  if (gpu_ && n < (int64_t{1} << 32)) {
    Partials p;
    gpu_count_pass(data, n, g, bins_, &p);
    add_partials(p, bins_, hist_.data_ptr<double>());
  } else {
    count(data, n, g, bins_, hist_.data_ptr<double>());
  }
}

at::Tensor HistogramObserver::forward(const at::Tensor& x_in) {
  if (x_in.numel() == 0) return x_in;
  at::NoGradGuard ng;
  at::Tensor x = x_in.detach().to(at::kFloat).contiguous();
  observe(x.data_ptr<float>(), x.numel());
  return x_in;
}

bool HistogramObserver::defer(const at::Tensor& x_in, DeferredObservation* out) const {
  out->empty = true;
  out->counts.clear();  // keeps its capacity: callers reuse one per observation
  if (x_in.numel() == 0) return true;
  const double* r = range_.data_ptr<double>();
  if (r[1] <= 0) return false;  // no grid yet: the first batch sets it
  at::NoGradGuard ng;
  at::Tensor x = x_in.detach().to(at::kFloat).contiguous();
  const float* data = x.data_ptr<float>();
  float lo, hi;
  scan(data, x.numel(), tensor_name_, &lo, &hi);
  // The lattice commit() will find: this one, or the current grid where range_ was
  // set from outside since (as sync_lattice re-anchors it).
  const bool synced = base_w_ > 0 && r[0] == wrote_lo_ && r[1] == wrote_w_;
  Grid g = synced ? Grid{base_lo_, 1.0 / base_w_, off_, k_} : Grid{r[0], 1.0 / r[1], 0, 1};
  // The tensor's bins on the current grid, unclamped (up to kDeferSpan grids away);
  // their edge cells must stay exact integers in a double.
  const double lim = static_cast<double>((kDeferSpan + 2) * bins_);
  if (2.0 * lim * static_cast<double>(g.k) >= 0x1p52) return false;
  const double qlo = g.bin(lo, lim), qhi = g.bin(hi, lim);
  if (qlo < -static_cast<double>(kDeferSpan * bins_) || qhi > static_cast<double>(kDeferSpan * bins_) ||
      qhi - qlo >= static_cast<double>(kDeferSpan * bins_))
    return false;
  // Count on the current grid's bins as cells, starting at the tensor's lowest.
  g.off += static_cast<int64_t>(qlo) * g.k;
  const int64_t cells = static_cast<int64_t>(qhi - qlo) + 1;
  out->counts.assign(static_cast<size_t>(cells), 0.0);
  count(data, x.numel(), g, cells, out->counts.data());
  out->empty = false;
  out->lo = lo;
  out->hi = hi;
  out->base_lo = synced ? base_lo_ : r[0];
  out->base_width = synced ? base_w_ : r[1];
  out->off = g.off;
  out->k = g.k;
  return true;
}

void HistogramObserver::commit(const DeferredObservation& d) {
  if (d.empty) return;
  replay_range(d.lo, d.hi);
  // The grid only coarsened since defer: each of its bins is a union of d's cells.
  if (d.base_lo != base_lo_ || d.base_width != base_w_)
    throw DataError("histogram of '" + tensor_name_ + "': its range grew so far within one step of distributed calibration "
                    "(to 2^50 / bins times its first batch's) that its bin lattice restarted; calibrate in one process, or use "
                    "a minmax observer for this tensor");
  if (k_ % d.k != 0 || floor_div(d.off - off_, d.k) * d.k != d.off - off_)
    throw InternalError("histogram of '" + tensor_name_ + "': a deferred observation does not lie on the current grid");
  double* h = hist_.data_ptr<double>();
  for (size_t i = 0; i < d.counts.size(); ++i) {
    if (d.counts[i] == 0) continue;
    const int64_t b = floor_div(d.off + static_cast<int64_t>(i) * d.k - off_, k_);
    h[std::min(std::max<int64_t>(b, 0), bins_ - 1)] += d.counts[i];
  }
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
  if (!o) throw ArgumentError("merge: observer types differ");
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
  base_w_ = 0;
}

}  // namespace qfx::quant
