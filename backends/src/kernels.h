// Internal: how the planner gets kernels from the registry, and the registration
// functions of the built-in implementations (one per kernel file).
#pragma once

#include <string>
#include <vector>

#include "ir.h"
#include "qfx/runtime/kernel.h"
#include "qfx/runtime/registry.h"

namespace qfx::runtime {

/// Builds the kernel for `n` at input metas `in` on backend `backend`: asks the
/// backend's implementations of `n.op`, then its parent's, down to "reference";
/// the first that does not decline builds it. `choice` (optional) receives which
/// one ran and who declined. Throws UnsupportedOpError naming the node and op when
/// no backend in the chain registers the op, and whatever the last implementation
/// asked throws (UnsupportedOpError, DataError) for a node none can run.
Kernel make_kernel(const ir::Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts,
                   const std::string& backend, bool nhwc_out = false, KernelChoice* choice = nullptr);

/// register_kernel without loading the built-ins first (used by the built-ins).
void add_kernel(const std::string& backend, const std::string& op, const std::string& impl, KernelFactory factory,
                bool takes_nhwc = false);
/// register_backend without loading the built-ins first.
void add_backend(const BackendInfo& info);

// Built-in registrations, called once by the registry (builtin.cpp).
void register_reference_conv_gemm();
void register_reference_elementwise();
void register_reference_logic();
void register_reference_pooling();
void register_reference_shape();
void register_reference_gather();
void register_reference_rnn();
void register_reference_quantize();
void register_reference_lut();
void register_reference_integer_only();
void register_reference_qsoftmax();
/// Add, Sub, Mul, Div, Pow, Mod, Min, Max, Bitwise* (binary.cpp).
void register_reference_binary();
/// ReduceMax / ReduceMin / ReduceProd, ArgMax / ArgMin (reduce.cpp).
void register_reference_reduce();
/// CumSum, TopK (scan.cpp).
void register_reference_scan();
/// GatherElements, GatherND, ScatterElements, ScatterND (index.cpp).
void register_reference_index();
/// Range, ConstantOfShape, Tile, Split (generate.cpp).
void register_reference_generate();
/// LayerNormalization in float (norm.cpp).
void register_reference_norm();
/// Pad: constant, reflect and edge modes (pad.cpp).
void register_reference_pad();
void register_onednn_kernels();
void register_simd_kernels();
void register_simd_matmul();
/// Float MatMul by a constant weight for up to 4 rows, asked before oneDNN (simd/gemv.cpp).
void register_simd_gemv();
/// MatMulNBits on the onednn backend: packed weights for few rows, else oneDNN (simd/matmul_nbits.cpp).
void register_simd_matmul_nbits();
/// MatMulNBits on the dequantized weight (reference/matmul_nbits.cpp).
void register_reference_matmul_nbits();
void register_simd_pool_lut();
/// The `cuda` backend (builds with QFX_HAVE_CUDA only).
void register_cuda_kernels();

/// The instruction set the vectorised kernels dispatch to for kernels built now:
/// "avx512", "avx2" or "baseline" (x86-64), the best this CPU has, capped by the
/// environment variable QFX_SIMD_ISA (tests force each path with it; asking for
/// more than the CPU has gives what it has).
std::string simd_isa();

/// Copies a channels-last [N, H, W, C] tensor of logical shape `shape` (NCHW) with
/// `elem` bytes per element into plain NCHW at `dst`.
void nhwc_to_nchw(const void* src, void* dst, const Shape& shape, size_t elem);
/// The inverse: copies plain NCHW `src` of logical shape `shape` into channels-last `dst`.
void nchw_to_nhwc(const void* src, void* dst, const Shape& shape, size_t elem);

/// True if the CPU has VNNI (AVX512-VNNI, AVX-VNNI or AMX), where oneDNN's int8
/// convolution accumulates u8 x s8 products exactly in int32. Without it oneDNN sums
/// pairs of products in int16 (saturating unless |w| <= 64) and halves s8-source
/// weights, so the onednn backend declines such QLinearConv/QGemm (the reference runs them).
bool onednn_int8_exact(DType src, const Tensor& weights);

/// True for the 2-D window attributes the conv and pooling kernels index: two
/// positive strides and dilations, four non-negative pads, positive kernel dims.
/// oneDNN's kernels decline anything else and the reference reports it (the ONNX
/// fuzzer found kernel after kernel reading past short attribute lists).
bool window_attrs_ok(const std::vector<int64_t>& s, const std::vector<int64_t>& d, const std::vector<int64_t>& p,
                     int64_t kH, int64_t kW);

/// The requantization multipliers of QLinearConv / QGemm / QLinearMatMul with M
/// output channels: m_c = (x scale * w scale_c) / y scale in float32, the order
/// every backend computes them in; `in_w` (optional) receives x scale * w scale_c.
/// The caller has checked that the weight scales are 1 or M.
std::vector<float> accumulator_multipliers(const ir::Node& n, int64_t M, std::vector<float>* in_w = nullptr);

/// The multipliers of accumulator_multipliers computed in double from the float32
/// scales (in_scale · w_scale_c / out_scale), as TFLite's conv / fully-connected
/// kernels compute them before QuantizeMultiplier: Requantizer's `exact`.
std::vector<double> exact_accumulator_multipliers(const ir::Node& n, int64_t M);
/// The requantization of conv / gemm `n` under its arithmetic, from the float32
/// multipliers `mult` (accumulator_multipliers) and their exact doubles.
Requantizer accumulator_requantizer(const ir::Node& n, const std::vector<float>& mult);

/// True when int8 average pool `n` divides its sum by the count (Arithmetic::
/// average_pool_divide, input and output qparams equal): kernels that only rescale
/// decline it, and the reference computes pool_divide.
bool divides_average_pool(const ir::Node& n);
/// True when fully connected `n` (QGemm, QLinearMatMul with constant weights) rounds
/// once (Arithmetic::fully_connected_single_rounding under kFixedPoint): kernels that
/// requantize as conv does decline it; the reference computes it.
bool single_rounding_fully_connected(const ir::Node& n);
/// TFLite's int8 average: `sum` (of codes) / `count` rounded half away from zero.
inline int32_t pool_divide(int64_t sum, int64_t count) {
  return static_cast<int32_t>(sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count);
}

/// The rescales of an int8 add / mul under a non-float elementwise arithmetic
/// (TFLite's int8 add): input a and b to the common scale 2 max(sa, sb), then that
/// to the output scaled down by 2^left_shift; mul: a * b to the output (a, b unused).
struct ElementwiseRescales {
  Requantizer a, b, out;
};
ElementwiseRescales elementwise_rescales(const ir::Node& n);

/// The int32 accumulator bias of QLinearConv / int8 Gemm: an int32 `b` as is; a
/// float32 `b` divided by input scale x weight scale (`in_w`, one per output
/// channel), rounded half to even and saturated to int32 (a float beyond the
/// int32 range has no defined conversion; NaN gives 0). Shared by the reference
/// and oneDNN kernels so both compute the same accumulators. `b` holds M values.
/// Throws DataError naming `n` for a bias of another dtype.
std::vector<int32_t> int32_bias(const ir::Node& n, const Tensor& b, int64_t M, const std::vector<float>& in_w);

}  // namespace qfx::runtime
