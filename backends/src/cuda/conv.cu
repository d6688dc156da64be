// CUDA int8 convolution: a direct kernel (any group, exact int32 sums) and the GEMM
// path's im2col and requantizing epilogue (the GEMM itself is cuBLASLt: gemm_lt.cpp).
#include "common.cuh"

namespace qfx::runtime::cuda {
namespace {

template <typename I, bool XNhwc, bool YNhwc>
__global__ void qconv_direct(ConvArgs a) {
  direct_conv<XNhwc, YNhwc>(
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

// Channels-last input: one thread per column of rows [N·oH·oW, kp], columns in
// (kh, kw, c) order (consecutive threads read consecutive channels).
template <typename I>
__global__ void im2col_nhwc(ConvArgs a, int64_t kp_in, int8_t* rows) {
  const Geometry<I, ConvArgs> g(a);
  const I kp = static_cast<I>(kp_in), K = g.C * g.kH * g.kW, total = g.N * g.oH * g.oW * kp;
  const int32_t xoff = a.xt == kU8 ? 128 : 0;
  const int8_t pad = static_cast<int8_t>(a.zx - xoff);
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    const I k = i % kp, row = i / kp;
    int8_t v = 0;  // the columns padding K to kp
    if (k < K) {
      const I c = k % g.C, kw = (k / g.C) % g.kW, kh = k / (g.C * g.kW);
      const I ow = row % g.oW, oh = (row / g.oW) % g.oH, n = row / (g.oW * g.oH);
      const I ih = oh * g.sH - g.pT + kh * g.dH, iw = ow * g.sW - g.pL + kw * g.dW;
      v = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? static_cast<int8_t>(load_code(a.x, a.xt, ((n * g.H + ih) * g.W + iw) * g.C + c) - xoff)
                                                     : pad;
    }
    rows[i] = v;
  }
}

// The same for C a multiple of 4 (then kp = K): four channels per thread as one
// 32-bit word; u8 codes become x - 128 by flipping each byte's top bit.
template <typename I>
__global__ void im2col_nhwc4(ConvArgs a, int8_t* rows) {
  const Geometry<I, ConvArgs> g(a);
  const I c4 = g.C / 4, total = g.N * g.oH * g.oW * g.kH * g.kW * c4;
  const uint32_t flip = a.xt == kU8 ? 0x80808080u : 0u;
  const uint32_t pad = static_cast<uint8_t>(static_cast<int8_t>(a.zx - (a.xt == kU8 ? 128 : 0))) * 0x01010101u;
  const uint32_t* x = static_cast<const uint32_t*>(a.x);
  uint32_t* out = reinterpret_cast<uint32_t*>(rows);
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    const I cc = i % c4, t = i / c4;
    const I kw = t % g.kW, kh = (t / g.kW) % g.kH, row = t / (g.kW * g.kH);
    const I ow = row % g.oW, oh = (row / g.oW) % g.oH, n = row / (g.oW * g.oH);
    const I ih = oh * g.sH - g.pT + kh * g.dH, iw = ow * g.sW - g.pL + kw * g.dW;
    out[i] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? x[((n * g.H + ih) * g.W + iw) * c4 + cc] ^ flip : pad;
  }
}

template <typename I, bool YNhwc>
__global__ void gemm_epilogue(ConvArgs a, const int32_t* acc_g, const int32_t* corr) {
  const Geometry<I, ConvArgs> g(a);
  const I hw = g.oH * g.oW, total = g.N * hw * g.M;
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    const I m = i % g.M, row = i / g.M;  // acc_g is [rows, M] row-major: channels last
    const int64_t acc = static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(acc_g[i]) + static_cast<uint32_t>(corr[m])));
    store_code(a.y, a.yt, YNhwc ? i : ((row / hw) * g.M + m) * hw + row % hw, requant_code(a.rq, acc, m));
  }
}

// Channels last with M a multiple of 4: four channels per thread, one 16-byte load of
// accumulators and one 32-bit store of codes.
template <typename I>
__global__ void gemm_epilogue_nhwc4(ConvArgs a, const int4* acc_g, const int32_t* corr) {
  const Geometry<I, ConvArgs> g(a);
  const I m4 = g.M / 4, total = g.N * g.oH * g.oW * m4;
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    const I m = (i % m4) * 4;
    const int4 v = acc_g[i];
    const int32_t sums[4] = {v.x, v.y, v.z, v.w};
    uint32_t word = 0;
    for (int j = 0; j < 4; ++j) {
      const int64_t acc =
          static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(sums[j]) + static_cast<uint32_t>(corr[m + j])));
      word |= (static_cast<uint32_t>(requant_code(a.rq, acc, m + j)) & 0xFFu) << (8 * j);
    }
    static_cast<uint32_t*>(a.y)[i] = word;
  }
}

template <typename I>
void launch_direct_as(const ConvArgs& a, unsigned b, cudaStream_t s) {
  if (a.x_nhwc && a.y_nhwc) qconv_direct<I, true, true><<<b, kThreads, 0, s>>>(a);
  else if (a.x_nhwc) qconv_direct<I, true, false><<<b, kThreads, 0, s>>>(a);
  else if (a.y_nhwc) qconv_direct<I, false, true><<<b, kThreads, 0, s>>>(a);
  else qconv_direct<I, false, false><<<b, kThreads, 0, s>>>(a);
}

}  // namespace

void launch_qconv_direct(const ConvArgs& a, cudaStream_t s) {
  const unsigned b = blocks_for(a.N * a.M * a.oH * a.oW);
  if (fits32(a, 0)) launch_direct_as<int32_t>(a, b, s);
  else launch_direct_as<int64_t>(a, b, s);
}

void launch_im2col(const ConvArgs& a, int64_t kp, int8_t* rows, cudaStream_t s) {
  const int64_t cells = a.N * a.oH * a.oW * kp;
  const bool i32 = fits32(a, cells);
  if (a.x_nhwc && a.C % 4 == 0) {
    const unsigned b = blocks_for(cells / 4);
    if (i32) im2col_nhwc4<int32_t><<<b, kThreads, 0, s>>>(a, rows);
    else im2col_nhwc4<int64_t><<<b, kThreads, 0, s>>>(a, rows);
  } else if (a.x_nhwc) {
    if (i32) im2col_nhwc<int32_t><<<blocks_for(cells), kThreads, 0, s>>>(a, kp, rows);
    else im2col_nhwc<int64_t><<<blocks_for(cells), kThreads, 0, s>>>(a, kp, rows);
  } else {
    const unsigned b = blocks_for(a.N * a.oH * a.oW * a.C);
    if (i32) im2col<int32_t><<<b, kThreads, 0, s>>>(a, kp, rows);
    else im2col<int64_t><<<b, kThreads, 0, s>>>(a, kp, rows);
  }
}

void launch_gemm_epilogue(const ConvArgs& a, const int32_t* g, const int32_t* corr, cudaStream_t s) {
  const unsigned b = blocks_for(a.N * a.oH * a.oW * a.M);
  const bool i32 = fits32(a, 0);
  if (a.y_nhwc && a.M % 4 == 0) {
    const unsigned b4 = blocks_for(a.N * a.oH * a.oW * a.M / 4);
    const int4* g4 = reinterpret_cast<const int4*>(g);
    if (i32) gemm_epilogue_nhwc4<int32_t><<<b4, kThreads, 0, s>>>(a, g4, corr);
    else gemm_epilogue_nhwc4<int64_t><<<b4, kThreads, 0, s>>>(a, g4, corr);
  } else if (a.y_nhwc) {
    if (i32) gemm_epilogue<int32_t, true><<<b, kThreads, 0, s>>>(a, g, corr);
    else gemm_epilogue<int64_t, true><<<b, kThreads, 0, s>>>(a, g, corr);
  } else {
    if (i32) gemm_epilogue<int32_t, false><<<b, kThreads, 0, s>>>(a, g, corr);
    else gemm_epilogue<int64_t, false><<<b, kThreads, 0, s>>>(a, g, corr);
  }
}

}  // namespace qfx::runtime::cuda
