// The observer taps' fixed-range histogram (Model::set_taps with TapKind::kHistogram):
// min, max and bin counts of a float tensor in one pass, so each value is read once
// while the tap runs.
#include "tap_histogram.h"

#include <omp.h>

#include <algorithm>

#include "qfx/runtime/arith_hd.h"

namespace qfx::runtime {
namespace {

constexpr int64_t kChunk = 1024;  // values whose bins are computed before counting

// Min, max and the clamped bin of every value of one chunk (vectorised: one select per
// statement, as GCC if-converts; NaN lands in bin 0, +Inf in the last bin). Compiled
// for AVX-512, AVX2 and the baseline, chosen at run time.
__attribute__((target_clones("avx512f", "avx2", "default"))) void chunk_bins(const float* x, int64_t m, float off,
                                                                              float scale, float last, int32_t* idx,
                                                                              float* lo, float* hi) {
  float l = *lo, h = *hi;
#pragma omp simd reduction(min : l) reduction(max : h)
  for (int64_t j = 0; j < m; ++j) {
    const float v = x[j];
    l = v < l ? v : l;
    h = v > h ? v : h;
    idx[j] = hd::histogram_bin(v, off, scale, last);
  }
  *lo = l;
  *hi = h;
}

// Counts one thread's values into `copies` interleaved histograms of `bins` counters
// (consecutive values in one bin do not wait on one counter).
void count_range(const float* x, int64_t n, float off, float scale, int64_t bins, int64_t copies, uint32_t* h,
                 float* lo, float* hi) {
  int32_t idx[kChunk];
  const float last = static_cast<float>(bins - 1);
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t m = std::min(kChunk, n - c);
    chunk_bins(x + c, m, off, scale, last, idx, lo, hi);
    int64_t j = 0;
    if (copies == 4)
      for (; j + 4 <= m; j += 4) {
        ++h[idx[j]];
        ++h[bins + idx[j + 1]];
        ++h[2 * bins + idx[j + 2]];
        ++h[3 * bins + idx[j + 3]];
      }
    for (; j < m; ++j) ++h[idx[j]];
  }
}

}  // namespace

int64_t tap_histogram_copies(int64_t bins) { return bins <= 4096 ? 4 : 1; }

void tap_histogram(const float* x, int64_t n, float lo_edge, float hi_edge, int64_t bins, uint32_t* scratch,
                   int max_threads, double* counts, float* lo, float* hi) {
  const float scale = static_cast<float>(bins) / (hi_edge - lo_edge), off = lo_edge;
  const int64_t copies = tap_histogram_copies(bins);
  const int threads = n > (int64_t{1} << 16) ? max_threads : 1;
  float tlo[256], thi[256];
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t b0 = n * t / nt, b1 = n * (t + 1) / nt;
    uint32_t* h = scratch + static_cast<size_t>(t * copies * bins);
    std::fill(h, h + copies * bins, 0u);  // each thread its own, while in its cache
    tlo[t] = x[0];
    thi[t] = x[0];
    count_range(x + b0, b1 - b0, off, scale, bins, copies, h, &tlo[t], &thi[t]);
    for (int64_t c = 1; c < copies; ++c)
      for (int64_t b = 0; b < bins; ++b) h[b] += h[c * bins + b];
  }
  float l = tlo[0], h = thi[0];
  for (int t = 1; t < threads; ++t) {
    l = std::min(l, tlo[t]);
    h = std::max(h, thi[t]);
  }
  *lo = l;
  *hi = h;
  for (int t = 0; t < threads; ++t) {
    const uint32_t* part = scratch + static_cast<size_t>(t * copies * bins);
    for (int64_t b = 0; b < bins; ++b) counts[b] += part[b];
  }
}

}  // namespace qfx::runtime
