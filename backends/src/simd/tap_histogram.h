// The observer taps' fixed-range histogram kernel (simd/tap_histogram.cpp).
#pragma once

#include <cstdint>

namespace qfx::runtime {

/// Interleaved copies of the histogram each thread counts into (4 for up to 4,096
/// bins, else 1): `tap_histogram` needs `threads * copies * bins` scratch counters.
int64_t tap_histogram_copies(int64_t bins);

/// Adds to counts[0, bins) how many of the `n` (> 0) values of `x` fall in each of
/// `bins` equal bins over [lo_edge, hi_edge) (bin = trunc((v - lo_edge) * bins /
/// (hi_edge - lo_edge)) in float, clamped to [0, bins); NaN counts in bin 0), and
/// sets *lo / *hi to the values' min and max. One pass over `x`, split over up to
/// `max_threads` (<= 256) OpenMP threads when n > 65,536; `scratch` holds
/// max_threads * tap_histogram_copies(bins) * bins counters (overwritten).
void tap_histogram(const float* x, int64_t n, float lo_edge, float hi_edge, int64_t bins, uint32_t* scratch,
                   int max_threads, double* counts, float* lo, float* hi);

}  // namespace qfx::runtime
