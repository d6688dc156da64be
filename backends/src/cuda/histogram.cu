// CUDA lattice histogram with min / max: the statistics library's histogram count
// (qfx/stats/histogram.h) on the device, with the same bin rule (hd::HistogramLattice).
#include "common.cuh"

namespace qfx::runtime::cuda {
namespace {

__device__ void atomic_min_f(float* p, float v) {
  int* ip = reinterpret_cast<int*>(p);
  int old = *ip;
  while (v < __int_as_float(old)) {
    const int seen = atomicCAS(ip, old, __float_as_int(v));
    if (seen == old) break;
    old = seen;
  }
}

__device__ void atomic_max_f(float* p, float v) {
  int* ip = reinterpret_cast<int*>(p);
  int old = *ip;
  while (v > __int_as_float(old)) {
    const int seen = atomicCAS(ip, old, __float_as_int(v));
    if (seen == old) break;
    old = seen;
  }
}

constexpr int kSharedBins = 4096;

// The calibration observer's count (hd::HistogramLattice): bins clamped to [0, bins),
// min and max folded as the observer's scan does (NaN never wins), NaN / Inf flagged.
__global__ void lattice_histogram(const float* x, int64_t n, hd::HistogramLattice g, int64_t bins,
                                  unsigned long long* counts, float* minmax, unsigned* nonfinite) {
  __shared__ unsigned int local[kSharedBins];
  const bool shared = bins <= kSharedBins;
  if (shared)
    for (int64_t b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  float lo = INFINITY, hi = -INFINITY;
  unsigned nf = 0;
  QFX_GRID_STRIDE(i, n) {
    const float v = x[i];
    nf |= (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    const int32_t b = g.counted_bin(v, bins);
    if (shared) atomicAdd(&local[b], 1u);
    else atomicAdd(&counts[b], 1ull);
  }
  atomic_min_f(&minmax[0], lo);
  atomic_max_f(&minmax[1], hi);
  if (nf) atomicOr(nonfinite, 1u);
  __syncthreads();
  if (shared)
    for (int64_t b = threadIdx.x; b < bins; b += blockDim.x)
      if (local[b]) atomicAdd(&counts[b], static_cast<unsigned long long>(local[b]));
}

}  // namespace

void launch_lattice_histogram(const float* x, int64_t n, const hd::HistogramLattice& g, int64_t bins,
                              unsigned long long* counts, float* minmax, unsigned* nonfinite, cudaStream_t s) {
  const unsigned b = blocks_for(n) < 1024 ? blocks_for(n) : 1024;
  lattice_histogram<<<b, kThreads, 0, s>>>(x, n, g, bins, counts, minmax, nonfinite);
}


}  // namespace qfx::runtime::cuda
