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

__global__ void fconv_direct(FConvArgs a) {
  const int64_t total = a.N * a.M * a.oH * a.oW, cg = a.C / a.group, mg = a.M / a.group;
  QFX_GRID_STRIDE(i, total) {
    const int64_t ow = i % a.oW, oh = (i / a.oW) % a.oH, m = (i / (a.oW * a.oH)) % a.M, n = i / (a.oW * a.oH * a.M);
    const int64_t g = m / mg;
    float acc = a.bias ? a.bias[m] : 0.0f;
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t kh = 0; kh < a.kH; ++kh) {
        const int64_t ih = oh * a.sH - a.pT + kh * a.dH;
        if (ih < 0 || ih >= a.H) continue;
        for (int64_t kw = 0; kw < a.kW; ++kw) {
          const int64_t iw = ow * a.sW - a.pL + kw * a.dW;
          if (iw < 0 || iw >= a.W) continue;
          acc += a.x[((n * a.C + g * cg + c) * a.H + ih) * a.W + iw] * a.w[((m * cg + c) * a.kH + kh) * a.kW + kw];
        }
      }
    a.y[i] = clampf(acc, a.lo, a.hi);
  }
}

__global__ void im2col_f(FConvArgs a, float* rows) {
  const int64_t K = a.C * a.kH * a.kW, total = a.N * a.oH * a.oW * K;
  QFX_GRID_STRIDE(i, total) {
    const int64_t k = i % K, row = i / K;
    const int64_t kw = k % a.kW, kh = (k / a.kW) % a.kH, c = k / (a.kW * a.kH);
    const int64_t ow = row % a.oW, oh = (row / a.oW) % a.oH, n = row / (a.oW * a.oH);
    const int64_t ih = oh * a.sH - a.pT + kh * a.dH, iw = ow * a.sW - a.pL + kw * a.dW;
    rows[i] = ih >= 0 && ih < a.H && iw >= 0 && iw < a.W ? a.x[((n * a.C + c) * a.H + ih) * a.W + iw] : 0.0f;
  }
}

__global__ void fgemm_epilogue(FConvArgs a, const float* g) {
  const int64_t hw = a.oH * a.oW, total = a.N * hw * a.M;
  QFX_GRID_STRIDE(i, total) {
    const int64_t m = i % a.M, row = i / a.M, n = row / hw, s = row % hw;
    a.y[(n * a.M + m) * hw + s] = clampf(g[i] + (a.bias ? a.bias[m] : 0.0f), a.lo, a.hi);
  }
}

__global__ void fbinary(FBinaryArgs a) {
  QFX_GRID_STRIDE(i, a.n) {
    int64_t rest = i, ia = 0, ib = 0;
    for (int d = a.rank - 1; d >= 0; --d) {
      const int64_t k = rest % a.out_dims[d];
      rest /= a.out_dims[d];
      ia += k * a.sa[d];
      ib += k * a.sb[d];
    }
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
    const int64_t ow = i % a.oW, oh = (i / a.oW) % a.oH, p = i / (a.oW * a.oH);
    float best = -3.402823466e38f;  // numeric_limits<float>::lowest(), as the reference
    for (int64_t kh = 0; kh < a.kH; ++kh) {
      const int64_t ih = oh * a.sH + kh * a.dH - a.pT;
      if (ih < 0 || ih >= a.H) continue;
      for (int64_t kw = 0; kw < a.kW; ++kw) {
        const int64_t iw = ow * a.sW + kw * a.dW - a.pL;
        if (iw >= 0 && iw < a.W) best = fmaxf(best, x[(p * a.H + ih) * a.W + iw]);
      }
    }
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
  fconv_direct<<<blocks_for(a.N * a.M * a.oH * a.oW), kThreads, 0, s>>>(a);
}
void launch_im2col_f(const FConvArgs& a, float* rows, cudaStream_t s) {
  im2col_f<<<blocks_for(a.N * a.oH * a.oW * a.C * a.kH * a.kW), kThreads, 0, s>>>(a, rows);
}
void launch_fgemm_epilogue(const FConvArgs& a, const float* g, cudaStream_t s) {
  fgemm_epilogue<<<blocks_for(a.N * a.oH * a.oW * a.M), kThreads, 0, s>>>(a, g);
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
