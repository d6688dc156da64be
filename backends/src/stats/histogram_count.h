// The lattice histogram's counting passes (stats/histogram.cpp): one pass over a
// tensor that bins every value and folds its min, max and NaN/Inf flag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qfx/runtime/arith_hd.h"

namespace qfx::stats::detail {

/// Where values fall: runtime::hd::HistogramLattice (arith_hd.h), the bin rule the
/// GPU's count (calibration.device: cuda) shares.
using Grid = runtime::hd::HistogramLattice;

/// Per-thread partial counts of one counting pass, and the values' min, max and
/// NaN/Inf flag from the same pass. Reusing one (thread_local) keeps its counters
/// allocated from pass to pass.
struct Partials {
  std::vector<uint32_t> part;  ///< [threads * copies * bins]; each thread's total in its first copy
  int threads = 1;
  float lo, hi;                ///< min and max (NaN skipped)
  uint32_t nonfinite = 0;      ///< any value NaN or Inf
  Partials();
};

/// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b);
/// One counting pass on the CPU: bins of `g` clamped to [0, bins).
void count_pass(const float* data, int64_t n, const Grid& g, int64_t bins, Partials* p);
/// count_pass on the GPU (runtime::cuda_lattice_histogram): one partial. `resident`:
/// `data` is in device memory already.
void gpu_count_pass(const float* data, int64_t n, const Grid& g, int64_t bins, Partials* p, bool resident = false);
/// Adds the partial counts into counts[0, bins).
void add_partials(const Partials& p, int64_t bins, double* counts);
/// count_pass + add_partials.
void count(const float* data, int64_t n, const Grid& g, int64_t bins, double* counts);

}  // namespace qfx::stats::detail
