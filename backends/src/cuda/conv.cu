// CUDA int8 convolution: a direct kernel (any group, exact int32 sums) and the GEMM
// path's im2col and requantizing epilogue (the GEMM itself is cuBLASLt: gemm_lt.cpp).
#include "common.cuh"

namespace qfx::runtime::cuda {
namespace {

__global__ void qconv_direct(ConvArgs a) {
  const int64_t total = a.N * a.M * a.oH * a.oW;
  const int64_t cg = a.C / a.group, mg = a.M / a.group;
  QFX_GRID_STRIDE(i, total) {
    const int64_t ow = i % a.oW, oh = (i / a.oW) % a.oH, m = (i / (a.oW * a.oH)) % a.M, n = i / (a.oW * a.oH * a.M);
    const int64_t g = m / mg;
    const int32_t wz = a.wz[m];
    int32_t acc = a.bias[m];
    for (int64_t c = 0; c < cg; ++c) {
      const int64_t xc = g * cg + c;
      for (int64_t kh = 0; kh < a.kH; ++kh) {
        const int64_t ih = oh * a.sH - a.pT + kh * a.dH;
        if (ih < 0 || ih >= a.H) continue;
        for (int64_t kw = 0; kw < a.kW; ++kw) {
          const int64_t iw = ow * a.sW - a.pL + kw * a.dW;
          if (iw < 0 || iw >= a.W) continue;
          const int32_t xv = load_code(a.x, a.xt, ((n * a.C + xc) * a.H + ih) * a.W + iw) - a.zx;
          const int32_t wv = load_code(a.w, a.wt, ((m * cg + c) * a.kH + kh) * a.kW + kw) - wz;
          acc += xv * wv;
        }
      }
    }
    store_code(a.y, a.yt, i, requant_code(a.rq, acc, m));
  }
}

__global__ void im2col(ConvArgs a, int64_t kp, int8_t* rows) {
  const int64_t K = a.C * a.kH * a.kW, total = a.N * a.oH * a.oW * kp;
  const int32_t xoff = a.xt == kU8 ? 128 : 0;
  QFX_GRID_STRIDE(i, total) {
    const int64_t k = i % kp, row = i / kp;
    int32_t v = 0;
    if (k < K) {
      const int64_t kw = k % a.kW, kh = (k / a.kW) % a.kH, c = k / (a.kW * a.kH);
      const int64_t ow = row % a.oW, oh = (row / a.oW) % a.oH, n = row / (a.oW * a.oH);
      const int64_t ih = oh * a.sH - a.pT + kh * a.dH, iw = ow * a.sW - a.pL + kw * a.dW;
      const bool in = ih >= 0 && ih < a.H && iw >= 0 && iw < a.W;
      v = (in ? load_code(a.x, a.xt, ((n * a.C + c) * a.H + ih) * a.W + iw) : a.zx) - xoff;
    }
    rows[i] = static_cast<int8_t>(v);
  }
}

__global__ void gemm_epilogue(ConvArgs a, const int32_t* g, const int32_t* corr) {
  const int64_t hw = a.oH * a.oW, total = a.N * hw * a.M;
  QFX_GRID_STRIDE(i, total) {
    const int64_t m = i % a.M, row = i / a.M;  // g is [rows, M] row-major
    const int64_t n = row / hw, s = row % hw;
    const int64_t acc = static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(g[i]) + static_cast<uint32_t>(corr[m])));
    store_code(a.y, a.yt, (n * a.M + m) * hw + s, requant_code(a.rq, acc, m));
  }
}

}  // namespace

void launch_qconv_direct(const ConvArgs& a, cudaStream_t s) {
  qconv_direct<<<blocks_for(a.N * a.M * a.oH * a.oW), kThreads, 0, s>>>(a);
}

void launch_im2col(const ConvArgs& a, int64_t kp, int8_t* rows, cudaStream_t s) {
  im2col<<<blocks_for(a.N * a.oH * a.oW * kp), kThreads, 0, s>>>(a, kp, rows);
}

void launch_gemm_epilogue(const ConvArgs& a, const int32_t* g, const int32_t* corr, cudaStream_t s) {
  gemm_epilogue<<<blocks_for(a.N * a.oH * a.oW * a.M), kThreads, 0, s>>>(a, g, corr);
}

}  // namespace qfx::runtime::cuda
