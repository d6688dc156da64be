// CUDA float kernels: convolution (direct, or im2col for cuBLAS SGEMM and its bias /
// activation epilogue), broadcast arithmetic, Relu / Clip, MaxPool, GlobalAveragePool.
#include <math.h>

#include "common.cuh"

namespace qfx::runtime::cuda {
namespace {

__device__ __forceinline__ float clampf(float v, float lo, float hi) {
  // fmaxf / fminf would turn NaN into a bound; comparisons keep it, as the reference.
  return v < lo ? lo : (v > hi ? hi : v);
}

template <typename I>
__global__ void fconv_direct(FConvArgs a) {
  direct_conv(
      Geometry<I, FConvArgs>(a), [&](I m) { return a.bias ? a.bias[m] : 0.0f; },
      [&](I x, I w, I) { return a.x[x] * a.w[w]; }, [&](I i, I, float acc) { a.y[i] = clampf(acc, a.lo, a.hi); });
}

// One thread per (row, input channel): the kH x kW window of that channel.
template <typename I>
__global__ void im2col_f(FConvArgs a, float* rows) {
  const Geometry<I, FConvArgs> g(a);
  const I K = g.C * g.kH * g.kW, total = g.N * g.oH * g.oW * g.C;
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    const I c = i % g.C, row = i / g.C;
    im2col_window(g, row, c, rows + static_cast<int64_t>(row) * K + c * g.kH * g.kW, 0.0f, [&](I at) { return a.x[at]; });
  }
}

template <typename I>
__global__ void fgemm_epilogue(FConvArgs a, const float* acc) {
  const Geometry<I, FConvArgs> g(a);
  const I hw = g.oH * g.oW, total = g.N * hw * g.M;
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    const I m = i % g.M, row = i / g.M, n = row / hw, s = row % hw;
    a.y[(n * g.M + m) * hw + s] = clampf(acc[i] + (a.bias ? a.bias[m] : 0.0f), a.lo, a.hi);
  }
}

__global__ void fbinary(FBinaryArgs a) {
  QFX_GRID_STRIDE(i, a.n) {
    int64_t ia, ib;
    broadcast_offsets(a, i, &ia, &ib);
    const float x = a.a[ia], y = a.b[ib];
    a.y[i] = clampf(a.op == 0 ? x + y : a.op == 1 ? x - y : a.op == 2 ? x * y : x / y, a.lo, a.hi);
  }
}

__global__ void fclamp(const float* x, float* y, int64_t n, float lo, float hi) {
  QFX_GRID_STRIDE(i, n) y[i] = clampf(x[i], lo, hi);
}

__global__ void fmaxpool(PoolArgs a) {
  const int64_t total = a.N * a.C * a.oH * a.oW;
  const float* x = static_cast<const float*>(a.x);
  QFX_GRID_STRIDE(i, total) {
    float best = -3.402823466e38f;  // numeric_limits<float>::lowest(), as the reference
    pool_window(a, i, [&](int64_t at) { best = fmaxf(best, x[at]); });
    static_cast<float*>(a.y)[i] = best;
  }
}

__global__ void fgap(const float* x, float* y, int64_t planes, int64_t hw) {
  __shared__ float part[kThreads];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < hw; j += blockDim.x) s += x[p * hw + j];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
      if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) y[p] = part[0] / static_cast<float>(hw);
    __syncthreads();
  }
}

}  // namespace

void launch_fconv_direct(const FConvArgs& a, cudaStream_t s) {
  const unsigned b = blocks_for(a.N * a.M * a.oH * a.oW);
  if (fits32(a, 0)) fconv_direct<int32_t><<<b, kThreads, 0, s>>>(a);
  else fconv_direct<int64_t><<<b, kThreads, 0, s>>>(a);
}
void launch_im2col_f(const FConvArgs& a, float* rows, cudaStream_t s) {
  const unsigned b = blocks_for(a.N * a.oH * a.oW * a.C);
  if (fits32(a, a.N * a.oH * a.oW * a.C * a.kH * a.kW)) im2col_f<int32_t><<<b, kThreads, 0, s>>>(a, rows);
  else im2col_f<int64_t><<<b, kThreads, 0, s>>>(a, rows);
}
void launch_fgemm_epilogue(const FConvArgs& a, const float* g, cudaStream_t s) {
  const unsigned b = blocks_for(a.N * a.oH * a.oW * a.M);
  if (fits32(a, 0)) fgemm_epilogue<int32_t><<<b, kThreads, 0, s>>>(a, g);
  else fgemm_epilogue<int64_t><<<b, kThreads, 0, s>>>(a, g);
}
void launch_fbinary(const FBinaryArgs& a, cudaStream_t s) { fbinary<<<blocks_for(a.n), kThreads, 0, s>>>(a); }
void launch_fclamp(const float* x, float* y, int64_t n, float lo, float hi, cudaStream_t s) {
  fclamp<<<blocks_for(n), kThreads, 0, s>>>(x, y, n, lo, hi);
}
void launch_fmaxpool(const PoolArgs& a, cudaStream_t s) {
  fmaxpool<<<blocks_for(a.N * a.C * a.oH * a.oW), kThreads, 0, s>>>(a);
}
void launch_fgap(const float* x, float* y, int64_t planes, int64_t hw, cudaStream_t s) {
  const unsigned b = static_cast<unsigned>(planes < 65535 ? (planes < 1 ? 1 : planes) : 65535);
  fgap<<<b, kThreads, 0, s>>>(x, y, planes, hw);
}

}  // namespace qfx::runtime::cuda
