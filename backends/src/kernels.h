// Internal: kernels the Program runs. A kernel is built for concrete input shapes
// (once per plan) and then run many times, from one thread at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir.h"

namespace qfx::runtime {

using Shape = std::vector<int64_t>;

/// Shape and dtype of one value.
struct Meta {
  Shape shape;             ///< logical shape (NCHW for 4-D)
  DType dtype = DType::kFloat32;
  bool nhwc = false;       ///< 4-D int8 stored channels last (N, H, W, C): what oneDNN's int8 kernels use
};

/// A kernel for one node at fixed input shapes.
struct Kernel {
  std::vector<Meta> outputs;  ///< output shapes/dtypes
  const char* impl = "reference";  ///< which implementation runs ("reference", "onednn")
  /// True if `run` takes its inputs in the layouts their Metas say (channels last
  /// included); otherwise the planner hands it plain copies of channels-last inputs.
  bool accepts_nhwc = false;
  /// Computes outputs from inputs (nullptr for an omitted optional input).
  std::function<void(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out)> run;
};

/// Which kernels to build.
enum class Backend { kReference, kOneDNN };

/// Builds the kernel for `n` at input metas `in` (constant inputs, i.e.
/// initializers, are given in `consts`, nullptr otherwise). Throws
/// UnsupportedOpError naming the node and op for an op or attribute outside the
/// supported set, DataError for inconsistent shapes.
/// `nhwc_out`: every consumer of the output can take channels last, so a kernel
/// that can may write it so (it says so in `outputs[i].nhwc`); without it outputs
/// are plain.
Kernel make_kernel(const ir::Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts,
                   Backend backend, bool nhwc_out = false);

/// oneDNN versions of Conv / Gemm / MatMul (fp32) and QConv / QGemm (int8);
/// returns false when the configuration is not one oneDNN runs here (then the
/// reference kernel is used).
bool make_onednn_kernel(const ir::Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts,
                        Kernel* k, bool nhwc_out = false);

/// Vectorised, multi-threaded versions of QuantizeLinear (per-tensor), QRelu / QClip
/// (a lookup table), QAdd / QMul (u8, equal shapes) and float Relu / Clip, used by
/// the onednn backend; equal to the reference kernels bit for bit. Returns false
/// outside those cases.
bool make_simd_kernel(const ir::Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts, Kernel* k,
                      bool nhwc_out = false);

/// Copies a channels-last [N, H, W, C] tensor of logical shape `shape` (NCHW) with
/// `elem` bytes per element into plain NCHW at `dst`.
void nhwc_to_nchw(const void* src, void* dst, const Shape& shape, size_t elem);

/// True if the CPU has VNNI (AVX512-VNNI, AVX-VNNI or AMX), where oneDNN's int8
/// convolution accumulates u8 x s8 products exactly in int32. Without it oneDNN sums
/// pairs of products in int16 (saturating unless |w| <= 64) and halves s8-source
/// weights, so the onednn backend sends such QConv/QGemm to the reference kernels.
bool onednn_int8_exact(DType src, const Tensor& weights);

/// ONNX QuantizeLinear arithmetic: saturate(round_half_even(x / scale) + zp).
inline int32_t quantize_value(float x, float scale, int32_t zp, int32_t qmin, int32_t qmax) {
  float q = __builtin_nearbyintf(x / scale);
  int64_t v = static_cast<int64_t>(q) + zp;
  if (q != q) v = zp;
  return static_cast<int32_t>(v < qmin ? qmin : (v > qmax ? qmax : v));
}

/// Requantization of an int32 accumulator with multiplier m = in_scale * w_scale / out_scale:
/// saturate(round_half_even(float(acc) * m) + zp), the reference integer arithmetic.
inline int32_t requantize(int32_t acc, float m, int32_t zp, int32_t qmin, int32_t qmax) {
  int64_t v = static_cast<int64_t>(__builtin_nearbyintf(static_cast<float>(acc) * m)) + zp;
  return static_cast<int32_t>(v < qmin ? qmin : (v > qmax ? qmax : v));
}

}  // namespace qfx::runtime
