// Internal: plain argument structs between the CUDA kernel factories (host C++,
// kernels.cpp) and the kernels (*.cu), and the launchers the .cu files define.
// Pointers are device pointers unless named host_*. Compiled by g++ and nvcc.
#pragma once

#include <cstdint>

#include "qfx/runtime/arith_hd.h"

typedef struct CUstream_st* cudaStream_t;

namespace qfx::runtime::cuda {

/// Element types of int8 codes: kU8 (uint8) or kS8 (int8).
enum CodeType : int { kU8 = 0, kS8 = 1 };

/// One op's requantization: the Requantizer's view (hd::RequantView, over device
/// copies of its multipliers) with the output zero point and clamp.
struct RequantArgs : hd::RequantView {
  int32_t zp = 0, lo = 0, hi = 0;
};

/// An int8 2-D convolution (QLinearConv; QGemm as a 1x1 convolution over 1x1
/// images): x [N, C, H, W] codes, w [M, C/group, kH, kW] codes, int32 bias [M],
/// weight zero points wz [M], output y [N, M, oH, oW] codes. `x_nhwc` / `y_nhwc`:
/// x / y stored channels last ([N, H, W, C] / [N, oH, oW, M] in memory).
struct ConvArgs {
  int64_t N, C, H, W, M, kH, kW, oH, oW, sH, sW, dH, dW, pT, pL, group;
  CodeType xt, wt, yt;
  int x_nhwc, y_nhwc;
  int32_t zx;
  const void* x;
  const void* w;
  const int32_t* bias;
  const int32_t* wz;
  void* y;
  RequantArgs rq;
};

/// Direct convolution: one thread per output code, exact int32 sums (any group,
/// weight zero points, u8 or s8 weights).
void launch_qconv_direct(const ConvArgs& a, cudaStream_t s);

/// im2col for the GEMM path (group 1, s8 weights with zero point 0): rows
/// [N·oH·oW, kp] of int8 (x - xoff), where xoff is 128 for u8 input and 0 for s8;
/// padding holds zx - xoff (a real 0) and columns K..kp hold 0. Columns are in
/// (c, kh, kw) order for NCHW input and in (kh, kw, c) order for channels-last input
/// (`a.x_nhwc`; four columns per thread when C is a multiple of 4).
void launch_im2col(const ConvArgs& a, int64_t kp, int8_t* rows, cudaStream_t s);

/// GEMM epilogue: acc = g[row, m] + corr[m] (corr = bias - (zx - xoff)·Σw),
/// requantized to y in NCHW ([N, M, oH, oW]; oH = oW = 1 for Gemm) or, with
/// `a.y_nhwc`, channels last (g's own order: [N·oH·oW, M]).
void launch_gemm_epilogue(const ConvArgs& a, const int32_t* g, const int32_t* corr, cudaStream_t s);

/// QuantizeLinear: y[i] = quantize(x[i]) with channel c = (i / inner) % channels.
void launch_quantize(const float* x, void* y, CodeType yt, int64_t n, int64_t inner, int64_t channels,
                     const float* scale, const int32_t* zp, int32_t lo, int32_t hi, cudaStream_t s);
/// DequantizeLinear: y[i] = (x[i] - zp_c) · scale_c.
void launch_dequantize(const void* x, CodeType xt, float* y, int64_t n, int64_t inner, int64_t channels,
                       const float* scale, const int32_t* zp, cudaStream_t s);

/// QLinearAdd / QLinearMul of two code tensors broadcast to `rank` dims of `out_dims`
/// (strides sa / sb: 0 on broadcast dims; `flat`: both inputs have the output's shape
/// and layout, so element i of each is read). kFloat: ONNX's real-valued op requantized;
/// otherwise TFLite's integer add / mul with rescales ra, rb, ro.
struct BinaryArgs {
  int rank;
  int64_t out_dims[8], sa[8], sb[8];
  int64_t n;
  CodeType at, bt, yt;
  int add, flat;
  float a_scale, b_scale, y_scale;
  int32_t za, zb;
  int left_shift;
  RequantArgs ra, rb, ro;  // ro carries the output zero point and clamp in both modes
  const void* a;
  const void* b;
  void* y;
};
void launch_qbinary(const BinaryArgs& a, cudaStream_t s);

/// A 256-entry table lookup over 8-bit codes (QLut, QRelu / QClip tables): y = table[x + offset].
void launch_lut(const void* x, void* y, int64_t n, int offset, const uint8_t* table, cudaStream_t s);

/// int8 MaxPool over [N, C, H, W] codes (padding never wins); `nhwc`: input and
/// output stored channels last.
struct PoolArgs {
  int64_t N, C, H, W, kH, kW, oH, oW, sH, sW, dH, dW, pT, pL;
  CodeType t;
  int nhwc;
  const void* x;
  void* y;
};
void launch_qmaxpool(const PoolArgs& a, cudaStream_t s);

/// QLinearGlobalAveragePool: per plane of `hw` codes, acc = Σx - hw·zx requantized by `rq`.
/// `channels` > 0: x is stored channels last ([N, hw, channels]; planes = N·channels),
/// y is [N, channels] either way.
void launch_qgap(const void* x, CodeType xt, void* y, CodeType yt, int64_t planes, int64_t hw, int64_t channels,
                 int32_t zx, const RequantArgs& rq, cudaStream_t s);

/// The calibration observer's histogram count on lattice `g` (hd::HistogramLattice):
/// counts[bin] += values of x [n] per bin (clamped to [0, bins)); minmax[0..1] (start
/// at +inf / -inf) fold the values' min and max; *nonfinite |= 1 on NaN or Inf.
void launch_lattice_histogram(const float* x, int64_t n, const hd::HistogramLattice& g, int64_t bins,
                              unsigned long long* counts, float* minmax, unsigned* nonfinite, cudaStream_t s);

}  // namespace qfx::runtime::cuda

namespace qfx::runtime::cuda {

/// A float 2-D convolution (Conv; Gemm / MatMul with a constant weight as a 1x1
/// convolution): x [N, C, H, W], w [M, C/group, kH, kW], optional bias [M], output
/// clamped to [lo, hi] (a fused Relu / Clip; ±infinity otherwise).
struct FConvArgs {
  int64_t N, C, H, W, M, kH, kW, oH, oW, sH, sW, dH, dW, pT, pL, group;
  const float* x;
  const float* w;
  const float* bias;  // nullptr: none
  float* y;
  float lo, hi;
};
/// Direct float convolution (any group), one thread per output.
void launch_fconv_direct(const FConvArgs& a, cudaStream_t s);
/// Float im2col: rows [N·oH·oW, C·kH·kW] (padding 0).
void launch_im2col_f(const FConvArgs& a, float* rows, cudaStream_t s);
/// y (NCHW) = clamp(g[row, m] + bias[m]) for the GEMM path's g [rows, M].
void launch_fgemm_epilogue(const FConvArgs& a, const float* g, cudaStream_t s);

/// Float elementwise op of two broadcast inputs (dims and strides as BinaryArgs):
/// op 0 Add, 1 Sub, 2 Mul, 3 Div; the result clamped to [lo, hi] (a fused Relu / Clip).
struct FBinaryArgs {
  int rank;
  int64_t out_dims[8], sa[8], sb[8];
  int64_t n;
  int op;
  float lo, hi;
  const float* a;
  const float* b;
  float* y;
};
void launch_fbinary(const FBinaryArgs& a, cudaStream_t s);
/// y = clamp(x, lo, hi) (Relu: lo 0, hi +infinity; NaN stays NaN).
void launch_fclamp(const float* x, float* y, int64_t n, float lo, float hi, cudaStream_t s);
/// Float MaxPool over [N, C, H, W] (PoolArgs geometry; x and y are float).
void launch_fmaxpool(const PoolArgs& a, cudaStream_t s);
/// Float GlobalAveragePool: per plane of `hw` values, sum / hw.
void launch_fgap(const float* x, float* y, int64_t planes, int64_t hw, cudaStream_t s);

}  // namespace qfx::runtime::cuda
