// CUDA int8 convolution: a direct kernel (any group, exact int32 sums) and the GEMM
// path's im2col and requantizing epilogue (the GEMM itself is cuBLASLt: gemm_lt.cpp).
#include "common.cuh"

namespace qfx::runtime::cuda {
namespace {

template <typename I>
__global__ void qconv_direct(ConvArgs a) {
  direct_conv(
      Geometry<I, ConvArgs>(a), [&](I m) { return a.bias[m]; },
      [&](I x, I w, I m) { return (load_code(a.x, a.xt, x) - a.zx) * (load_code(a.w, a.wt, w) - a.wz[m]); },
      [&](I i, I m, int32_t acc) { store_code(a.y, a.yt, i, requant_code(a.rq, acc, m)); });
}

// One thread per (row, input channel): the kH x kW window of that channel.
template <typename I>
__global__ void im2col(ConvArgs a, int64_t kp_in, int8_t* rows) {
  const Geometry<I, ConvArgs> g(a);
  const I kp = static_cast<I>(kp_in), K = g.C * g.kH * g.kW, total = g.N * g.oH * g.oW * g.C;
  const int32_t xoff = a.xt == kU8 ? 128 : 0;
  const int32_t pad = a.zx - xoff;
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    const I c = i % g.C, row = i / g.C;
    im2col_window(g, row, c, rows + static_cast<int64_t>(row) * kp + c * g.kH * g.kW, static_cast<int8_t>(pad),
                  [&](I at) { return static_cast<int8_t>(load_code(a.x, a.xt, at) - xoff); });
    if (c == g.C - 1)
      for (I k = K; k < kp; ++k) rows[static_cast<int64_t>(row) * kp + k] = 0;  // the columns padding K to kp
  }
}

template <typename I>
__global__ void gemm_epilogue(ConvArgs a, const int32_t* acc_g, const int32_t* corr) {
  const Geometry<I, ConvArgs> g(a);
  const I hw = g.oH * g.oW, total = g.N * hw * g.M;
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    const I m = i % g.M, row = i / g.M;  // acc_g is [rows, M] row-major
    const I n = row / hw, s = row % hw;
    const int64_t acc = static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(acc_g[i]) + static_cast<uint32_t>(corr[m])));
    store_code(a.y, a.yt, (n * g.M + m) * hw + s, requant_code(a.rq, acc, m));
  }
}

}  // namespace

void launch_qconv_direct(const ConvArgs& a, cudaStream_t s) {
  const unsigned b = blocks_for(a.N * a.M * a.oH * a.oW);
  if (fits32(a, 0)) qconv_direct<int32_t><<<b, kThreads, 0, s>>>(a);
  else qconv_direct<int64_t><<<b, kThreads, 0, s>>>(a);
}

void launch_im2col(const ConvArgs& a, int64_t kp, int8_t* rows, cudaStream_t s) {
  const unsigned b = blocks_for(a.N * a.oH * a.oW * a.C);
  if (fits32(a, a.N * a.oH * a.oW * kp)) im2col<int32_t><<<b, kThreads, 0, s>>>(a, kp, rows);
  else im2col<int64_t><<<b, kThreads, 0, s>>>(a, kp, rows);
}

void launch_gemm_epilogue(const ConvArgs& a, const int32_t* g, const int32_t* corr, cudaStream_t s) {
  const unsigned b = blocks_for(a.N * a.oH * a.oW * a.M);
  if (fits32(a, 0)) gemm_epilogue<int32_t><<<b, kThreads, 0, s>>>(a, g, corr);
  else gemm_epilogue<int64_t><<<b, kThreads, 0, s>>>(a, g, corr);
}

}  // namespace qfx::runtime::cuda
