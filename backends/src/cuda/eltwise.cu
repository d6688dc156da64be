// CUDA int8 elementwise and pooling kernels: QuantizeLinear, DequantizeLinear,
// QLinearAdd / QLinearMul, table lookups, int8 MaxPool, QLinearGlobalAveragePool.
// The arithmetic is arith_hd.h's, as in the reference kernels.
#include "common.cuh"

namespace qfx::runtime::cuda {
namespace {

__global__ void quantize(const float* x, void* y, CodeType yt, int64_t n, int64_t inner, int64_t channels,
                         const float* scale, const int32_t* zp, int32_t lo, int32_t hi) {
  QFX_GRID_STRIDE(i, n) {
    const int64_t c = channels == 1 ? 0 : (i / inner) % channels;
    store_code(y, yt, i, hd::quantize_value(x[i], scale[c], zp[c], lo, hi));
  }
}

__global__ void dequantize(const void* x, CodeType xt, float* y, int64_t n, int64_t inner, int64_t channels,
                           const float* scale, const int32_t* zp) {
  QFX_GRID_STRIDE(i, n) {
    const int64_t c = channels == 1 ? 0 : (i / inner) % channels;
    y[i] = static_cast<float>(static_cast<int64_t>(load_code(x, xt, i)) - zp[c]) * scale[c];
  }
}

// One output code of QLinearAdd / QLinearMul from its input codes.
__device__ __forceinline__ int32_t binary_code(const BinaryArgs& a, int32_t qa, int32_t qb) {
  if (a.ro.mode == RequantMode::kFloat) {
    const float ra = a.a_scale * static_cast<float>(qa - a.za), rb = a.b_scale * static_cast<float>(qb - a.zb);
    return hd::quantize_value(a.add ? ra + rb : ra * rb, a.y_scale, a.ro.zp, a.ro.lo, a.ro.hi);
  }
  const int64_t da = qa - a.za, db = qb - a.zb;
  const int64_t acc = a.add ? int64_t{a.ra.scaled(da * (int64_t{1} << a.left_shift), 0)} +
                                  a.rb.scaled(db * (int64_t{1} << a.left_shift), 0)
                            : da * db;
  return requant_code(a.ro, acc, 0);
}

__global__ void qbinary(BinaryArgs a) {
  QFX_GRID_STRIDE(i, a.n) {
    int64_t ia = i, ib = i;
    if (!a.flat) broadcast_offsets(a, i, &ia, &ib);
    store_code(a.y, a.yt, i, binary_code(a, load_code(a.a, a.at, ia), load_code(a.b, a.bt, ib)));
  }
}

// Code j (0..3) of a 32-bit word of four codes of type t.
__device__ __forceinline__ int32_t code_of(uint32_t word, int j, CodeType t) {
  const uint32_t byte = (word >> (8 * j)) & 0xFFu;
  return t == kU8 ? static_cast<int32_t>(byte) : static_cast<int32_t>(static_cast<int8_t>(byte));
}

// Inputs of the output's shape and layout, n a multiple of 4: four codes per thread.
__global__ void qbinary_flat4(BinaryArgs a) {
  const uint32_t* pa = static_cast<const uint32_t*>(a.a);
  const uint32_t* pb = static_cast<const uint32_t*>(a.b);
  QFX_GRID_STRIDE(i, a.n / 4) {
    const uint32_t wa = pa[i], wb = pb[i];
    uint32_t word = 0;
    for (int j = 0; j < 4; ++j)
      word |= (static_cast<uint32_t>(binary_code(a, code_of(wa, j, a.at), code_of(wb, j, a.bt))) & 0xFFu) << (8 * j);
    static_cast<uint32_t*>(a.y)[i] = word;
  }
}

__global__ void lut(const uint8_t* x, uint8_t* y, int64_t n, int offset, const uint8_t* table) {
  QFX_GRID_STRIDE(i, n) y[i] = table[(x[i] + offset) & 255];
}

__global__ void qmaxpool(PoolArgs a) {
  const int64_t total = a.N * a.C * a.oH * a.oW;
  QFX_GRID_STRIDE(i, total) {
    int32_t best = a.t == kU8 ? 0 : -128;
    pool_window(a, i, [&](int64_t at) {
      const int32_t v = load_code(a.x, a.t, at);
      best = v > best ? v : best;
    });
    store_code(a.y, a.t, i, best);
  }
}

// One block per plane: the exact integer sum, then the requantization.
__global__ void qgap(const void* x, CodeType xt, void* y, CodeType yt, int64_t planes, int64_t hw, int32_t zx,
                     RequantArgs rq) {
  __shared__ long long part[kThreads];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    long long s = 0;
    for (int64_t j = threadIdx.x; j < hw; j += blockDim.x) s += load_code(x, xt, p * hw + j);
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
      if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const int32_t acc = static_cast<int32_t>(part[0] - hw * zx);
      store_code(y, yt, p, requant_code(rq, acc, 0));
    }
    __syncthreads();
  }
}

// Channels last: one thread per (image, channel), consecutive threads on consecutive
// channels (coalesced), the exact integer sum over the plane's hw codes.
__global__ void qgap_nhwc(const void* x, CodeType xt, void* y, CodeType yt, int64_t planes, int64_t hw, int64_t channels,
                          int32_t zx, RequantArgs rq) {
  QFX_GRID_STRIDE(p, planes) {
    const int64_t n = p / channels, c = p % channels;
    long long s = 0;
    for (int64_t j = 0; j < hw; ++j) s += load_code(x, xt, (n * hw + j) * channels + c);
    store_code(y, yt, p, requant_code(rq, static_cast<int32_t>(s - hw * zx), 0));
  }
}

}  // namespace

void launch_quantize(const float* x, void* y, CodeType yt, int64_t n, int64_t inner, int64_t channels,
                     const float* scale, const int32_t* zp, int32_t lo, int32_t hi, cudaStream_t s) {
  quantize<<<blocks_for(n), kThreads, 0, s>>>(x, y, yt, n, inner, channels, scale, zp, lo, hi);
}

void launch_dequantize(const void* x, CodeType xt, float* y, int64_t n, int64_t inner, int64_t channels,
                       const float* scale, const int32_t* zp, cudaStream_t s) {
  dequantize<<<blocks_for(n), kThreads, 0, s>>>(x, xt, y, n, inner, channels, scale, zp);
}

void launch_qbinary(const BinaryArgs& a, cudaStream_t s) {
  if (a.flat && a.n % 4 == 0) qbinary_flat4<<<blocks_for(a.n / 4), kThreads, 0, s>>>(a);
  else qbinary<<<blocks_for(a.n), kThreads, 0, s>>>(a);
}

void launch_lut(const void* x, void* y, int64_t n, int offset, const uint8_t* table, cudaStream_t s) {
  lut<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), n, offset, table);
}

void launch_qmaxpool(const PoolArgs& a, cudaStream_t s) {
  qmaxpool<<<blocks_for(a.N * a.C * a.oH * a.oW), kThreads, 0, s>>>(a);
}

void launch_qgap(const void* x, CodeType xt, void* y, CodeType yt, int64_t planes, int64_t hw, int64_t channels,
                 int32_t zx, const RequantArgs& rq, cudaStream_t s) {
  if (channels > 0) {
    qgap_nhwc<<<blocks_for(planes), kThreads, 0, s>>>(x, xt, y, yt, planes, hw, channels, zx, rq);
    return;
  }
  const unsigned b = static_cast<unsigned>(planes < 65535 ? (planes < 1 ? 1 : planes) : 65535);
  qgap<<<b, kThreads, 0, s>>>(x, xt, y, yt, planes, hw, zx, rq);
}

}  // namespace qfx::runtime::cuda
