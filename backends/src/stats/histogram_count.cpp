// The lattice histogram's counting passes (see histogram_count.h): vectorised
// binning with a float shortcut, per-thread interleaved counters.
#include "histogram_count.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "fold.h"
#include "qfx/error.h"
#include "qfx/runtime/cuda.h"

namespace qfx::stats::detail {
namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

Partials::Partials() : lo(kInf), hi(-kInf) {}

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

namespace {
// idx[j] = the bin of x[j] on `g`, clamped to [0, bins): Grid::bin's arithmetic
// with a truncating conversion, which vectorises (below bin 0 it may start one
// too high; the exact edge comparisons then give a bin <= 0, clamped to 0 all
// the same). Also folds the values into *lo / *hi and flags NaN or Inf in
// *nonfinite (fold's test), so one pass can both count and scan. Compiled for
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
                                                                                     uint32_t* nonfinite, int32_t* left) {
  const float glo = g.lo, inv = g.inv, eps = g.eps, flast = static_cast<float>(bins - 1);
  float l = *lo, h = *hi;
  uint32_t nf = *nonfinite;
  int32_t near = 0;
#pragma omp simd reduction(min : l) reduction(max : h) reduction(| : nf) reduction(+ : near)
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
    near += ba == bc ? 0 : 1;
  }
  *lo = l;
  *hi = h;
  *nonfinite = nf;
  *left = near;
}

}  // namespace

// One counting pass: per-thread integer counts (four interleaved copies where
// they are small, so consecutive equal bins do not serialise on one counter),
// and the values' min, max and NaN/Inf flag from the same pass.
void count_pass(const float* data, int64_t n, const Grid& g, int64_t bins, Partials* p) {
  const int threads = n > 65536 ? std::min(omp_get_max_threads(), 256) : 1;
  const int64_t copies = bins <= 4096 ? 4 : 1;
  p->part.resize(static_cast<size_t>(threads * copies * bins));  // no allocation when reused
  p->threads = threads;
  p->lo = kInf;
  p->hi = -kInf;
  p->nonfinite = 0;
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
    float edge_value = std::numeric_limits<float>::quiet_NaN();
    int32_t edge_bin = 0;
    for (int64_t i = b0; i < b1; i += 512) {
      const int64_t m = std::min<int64_t>(512, b1 - i);
      int32_t left = 0;
      if (fg.ok) float_bin_indices(data + i, m, fg, bins, idx, &tlo[t], &thi[t], &tnf[t], &left);
      // Many values beside an edge (a value repeated there): the exact bins of the
      // whole chunk, vectorised, rather than one at a time.
      if (!fg.ok || left > 32) bin_indices(data + i, m, g, bins, idx, &tlo[t], &thi[t], &tnf[t]);
      // Values the float shortcut left (idx -1, beside a bin edge): the lattice's bin,
      // computed once for a run of the same value (ReLU's zeros on a grid that starts
      // below zero).
      auto exact = [&](int64_t j) {
        if (idx[j] >= 0) return;
        const float v = data[i + j];
        if (v != edge_value) {  // never equal for NaN
          edge_value = v;
          edge_bin = g.counted_bin(v, bins);
        }
        idx[j] = edge_bin;
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
void gpu_count_pass(const float* data, int64_t n, const Grid& g, int64_t bins, Partials* p, bool resident) {
  std::vector<double> c(static_cast<size_t>(bins), 0.0);
  bool nonfinite = false;
  runtime::cuda_lattice_histogram(data, n, g, bins, c.data(), &p->lo, &p->hi, &nonfinite, resident);
  p->threads = 1;
  p->part.assign(c.begin(), c.end());
  p->nonfinite = nonfinite;
}

}  // namespace qfx::stats::detail
