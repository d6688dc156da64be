// Internal: device helpers shared by the .cu files: code loads and stores, the
// requantization of args.h's RequantArgs (the shared arithmetic's RequantView),
// grid-stride launch geometry.
#pragma once

#include <cuda_runtime.h>

#include "args.h"

namespace qfx::runtime::cuda {

__device__ __forceinline__ int32_t load_code(const void* p, CodeType t, int64_t i) {
  return t == kU8 ? static_cast<int32_t>(static_cast<const uint8_t*>(p)[i]) : static_cast<int32_t>(static_cast<const int8_t*>(p)[i]);
}

__device__ __forceinline__ void store_code(void* p, CodeType t, int64_t i, int32_t v) {
  if (t == kU8) static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
  else static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
}

/// Requantizer::code on the device: scaled + zero point, clamped to [lo, hi].
__device__ __forceinline__ int32_t requant_code(const RequantArgs& r, int64_t acc, int64_t c) {
  return r.code(acc, c, r.zp, r.lo, r.hi);
}

/// The kernels index in I: int32_t where every index fits (64-bit division is several
/// times slower on the GPU), int64_t otherwise.
template <typename I, typename A>
struct Geometry {
  I N, C, H, W, M, kH, kW, oH, oW, sH, sW, dH, dW, pT, pL, group;
  __device__ explicit Geometry(const A& a)
      : N(static_cast<I>(a.N)), C(static_cast<I>(a.C)), H(static_cast<I>(a.H)), W(static_cast<I>(a.W)),
        M(static_cast<I>(a.M)), kH(static_cast<I>(a.kH)), kW(static_cast<I>(a.kW)), oH(static_cast<I>(a.oH)),
        oW(static_cast<I>(a.oW)), sH(static_cast<I>(a.sH)), sW(static_cast<I>(a.sW)), dH(static_cast<I>(a.dH)),
        dW(static_cast<I>(a.dW)), pT(static_cast<I>(a.pT)), pL(static_cast<I>(a.pL)), group(static_cast<I>(a.group)) {}
};

/// int32 indexing when every index of a convolution's launch (input, output, and
/// `extra`: im2col rows) stays below 2^30 (grid-stride steps cannot overflow then).
template <typename A>
bool fits32(const A& a, int64_t extra) {
  const int64_t lim = int64_t{1} << 30;
  return a.N * a.C * a.H * a.W < lim && a.N * a.M * a.oH * a.oW < lim && extra < lim;
}

/// The direct convolution (one thread per output element i, grid-stride; the output
/// [N, M, oH, oW] in NCHW, or [N, oH, oW, M] when YNhwc; the input NCHW, or channels
/// last when XNhwc): acc = init(m), plus term(x index, w index) over the in-image
/// window of every input channel of m's group (channels, then rows, then columns),
/// then done(i, m, acc).
template <bool XNhwc = false, bool YNhwc = false, typename I, typename A, typename Init, typename Term, typename Done>
__device__ __forceinline__ void direct_conv(const Geometry<I, A>& g, Init init, Term term, Done done) {
  const I total = g.N * g.M * g.oH * g.oW, cg = g.C / g.group, mg = g.M / g.group;
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    I ow, oh, m, n;
    if constexpr (YNhwc) {
      m = i % g.M;
      const I r = i / g.M;
      ow = r % g.oW, oh = (r / g.oW) % g.oH, n = r / (g.oW * g.oH);
    } else {
      ow = i % g.oW, oh = (i / g.oW) % g.oH, m = (i / (g.oW * g.oH)) % g.M, n = i / (g.oW * g.oH * g.M);
    }
    const I grp = m / mg;
    auto acc = init(m);
    for (I c = 0; c < cg; ++c)
      for (I kh = 0; kh < g.kH; ++kh) {
        const I ih = oh * g.sH - g.pT + kh * g.dH;
        if (ih < 0 || ih >= g.H) continue;
        for (I kw = 0; kw < g.kW; ++kw) {
          const I iw = ow * g.sW - g.pL + kw * g.dW;
          if (iw < 0 || iw >= g.W) continue;
          const I xi = XNhwc ? ((n * g.H + ih) * g.W + iw) * g.C + grp * cg + c : ((n * g.C + grp * cg + c) * g.H + ih) * g.W + iw;
          acc += term(xi, ((m * cg + c) * g.kH + kh) * g.kW + kw, m);
        }
      }
    done(i, m, acc);
  }
}

/// Calls visit(x index) for every in-image element of output element i's pooling
/// window (PoolArgs geometry; input and output NCHW, or both channels last).
template <typename Visit>
__device__ __forceinline__ void pool_window(const PoolArgs& a, int64_t i, Visit visit) {
  int64_t ow, oh, n, c;
  if (a.nhwc) {
    c = i % a.C;
    const int64_t r = i / a.C;
    ow = r % a.oW, oh = (r / a.oW) % a.oH, n = r / (a.oW * a.oH);
  } else {
    ow = i % a.oW, oh = (i / a.oW) % a.oH;
    const int64_t p = i / (a.oW * a.oH);
    c = p % a.C, n = p / a.C;
  }
  for (int64_t kh = 0; kh < a.kH; ++kh) {
    const int64_t ih = oh * a.sH + kh * a.dH - a.pT;
    if (ih < 0 || ih >= a.H) continue;
    for (int64_t kw = 0; kw < a.kW; ++kw) {
      const int64_t iw = ow * a.sW + kw * a.dW - a.pL;
      if (iw >= 0 && iw < a.W) visit(a.nhwc ? ((n * a.H + ih) * a.W + iw) * a.C + c : ((n * a.C + c) * a.H + ih) * a.W + iw);
    }
  }
}

/// One (row, channel) window of im2col: out[kh·kW + kw] = value(index of x) where the
/// window lies inside the image, `pad` where it lies in the padding.
template <typename I, typename A, typename T, typename Value>
__device__ __forceinline__ void im2col_window(const Geometry<I, A>& g, I row, I c, T* out, T pad, Value value) {
  const I ow = row % g.oW, oh = (row / g.oW) % g.oH, n = row / (g.oW * g.oH);
  for (I kh = 0; kh < g.kH; ++kh) {
    const I ih = oh * g.sH - g.pT + kh * g.dH;
    for (I kw = 0; kw < g.kW; ++kw) {
      const I iw = ow * g.sW - g.pL + kw * g.dW;
      out[kh * g.kW + kw] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? value(((n * g.C + c) * g.H + ih) * g.W + iw) : pad;
    }
  }
}

/// Element offsets into two inputs broadcast to an output of `a.rank` dims
/// (`a.out_dims`, strides `a.sa` / `a.sb`, 0 on broadcast dims) for output element i.
template <typename Args>
__device__ __forceinline__ void broadcast_offsets(const Args& a, int64_t i, int64_t* ia, int64_t* ib) {
  int64_t rest = i, oa = 0, ob = 0;
  for (int d = a.rank - 1; d >= 0; --d) {
    const int64_t k = rest % a.out_dims[d];
    rest /= a.out_dims[d];
    oa += k * a.sa[d];
    ob += k * a.sb[d];
  }
  *ia = oa;
  *ib = ob;
}

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n items (at most 65,535 x 256 threads).
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

#define QFX_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

}  // namespace qfx::runtime::cuda
