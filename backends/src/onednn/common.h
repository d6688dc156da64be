// Internal: what the runtime's oneDNN kernels share, and the seam between
// oneDNN's 2.x API (operation descriptors, output scales) and its 3.x API
// (primitive descriptors made from the engine, per-argument scales and zero points
// given at execution). Every other file of backends/src/onednn builds against both.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "../kernels.h"

namespace qfx::runtime::onednn {

/// True when the oneDNN headers are 3.x or later.
#if DNNL_VERSION_MAJOR >= 3
inline constexpr bool kApi3 = true;
#else
inline constexpr bool kApi3 = false;
#endif

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

/// The process's CPU engine.
dnnl::engine& engine();
/// This thread's stream on engine().
dnnl::stream& stream();

/// True if oneDNN's effective ISA has VNNI (AVX-512 VNNI, AVX-VNNI or later, AMX):
/// its int8 kernels then accumulate u8 x s8 products exactly in int32.
bool has_vnni();

/// A run function: inputs and outputs of the node.
using RunFn = std::function<void(const std::vector<const Tensor*>&, const std::vector<Tensor*>&)>;

/// The run function of `prim` between plain user tensors (input 0 -> output 0):
/// reorders into and out of the primitive's layouts (`src_pd`, `dst_pd`) when they
/// differ from the user's (`user_src`, `user_dst`), every memory object, buffer and
/// argument built once; a run only swaps the user buffers in. `fixed` holds the
/// other arguments (weights, bias, scales, zero points, post-op operands);
/// `keep_alive` owns what their memory points into.
RunFn make_exec(std::shared_ptr<dnnl::primitive> prim, const memory::desc& user_src, const memory::desc& src_pd,
                const memory::desc& user_dst, const memory::desc& dst_pd, const memory::desc& scratch_pd,
                std::unordered_map<int, memory> fixed, std::vector<std::shared_ptr<void>> keep_alive);

/// `data` (laid out as `user`) reordered once into `want`; the new buffer is
/// appended to `keep`.
memory reorder_weights(const memory::desc& user, const void* data, const memory::desc& want,
                       std::vector<std::shared_ptr<void>>* keep);

/// A memory of `values` (copied; the copy is appended to `keep`) with descriptor `md`.
template <typename T>
memory constant(const memory::desc& md, const std::vector<T>& values, std::vector<std::shared_ptr<void>>* keep) {
  auto copy = std::make_shared<std::vector<T>>(values);
  keep->push_back(copy);
  return memory(md, engine(), copy->data());
}

/// An attribute with a user scratchpad and no post-ops.
dnnl::primitive_attr scratchpad_attr();
/// Appends an eltwise post-op (scale 1) in either API.
void append_eltwise(dnnl::post_ops* po, dnnl::algorithm alg, float alpha, float beta);
/// The fp32 attribute of node `n`: its fused Relu / Clip as eltwise post-ops.
dnnl::primitive_attr fp32_attr(const ir::Node& n);

/// Forward-inference primitive descriptors in either API, made on engine(); an empty
/// `bias` means none. Throw dnnl::error where oneDNN has no implementation.
/// Convolution (direct); dilations are oneDNN's (0: dense).
dnnl::convolution_forward::primitive_desc conv_pd(const memory::desc& src, const memory::desc& w,
                                                  const memory::desc& bias, const memory::desc& dst,
                                                  const memory::dims& strides, const memory::dims& dilations,
                                                  const memory::dims& pad_l, const memory::dims& pad_r,
                                                  const dnnl::primitive_attr& attr);
/// Inner product: src [M, K], weights [N, K], dst [M, N].
dnnl::inner_product_forward::primitive_desc inner_product_pd(const memory::desc& src, const memory::desc& w,
                                                             const memory::desc& bias, const memory::desc& dst,
                                                             const dnnl::primitive_attr& attr);
/// Matmul: src [M, K] x weights [K, N] -> dst [M, N].
dnnl::matmul::primitive_desc matmul_pd(const memory::desc& src, const memory::desc& w, const memory::desc& bias,
                                       const memory::desc& dst, const dnnl::primitive_attr& attr);
/// 2-D pooling (max, or average with or without the padding), dense windows.
dnnl::pooling_forward::primitive_desc pooling_pd(dnnl::algorithm alg, const memory::desc& src, const memory::desc& dst,
                                                 const memory::dims& strides, const memory::dims& kernel,
                                                 const memory::dims& pad_l, const memory::dims& pad_r,
                                                 const dnnl::primitive_attr& attr);

/// The geometry of an NCHW convolution (ONNX Conv / QLinearConv attributes) as
/// oneDNN takes it: input [N, C, H, W], weights [M, C / group, kH, kW] (as `w_dims`:
/// [M, C, kH, kW] for group 1, else [group, M / group, C / group, kH, kW], plain
/// layout `w_tag`), output [N, M, oH, oW]; dilations in oneDNN's form (0: dense).
struct ConvShape {
  memory::dims src, dst, w_dims, strides, dilations, pad_l, pad_r;
  tag w_tag = tag::oihw;
};
/// Reads node `r.node`'s convolution on input shape `x` with weight shape `ws` (both
/// 4-D) into `c`. False, having declined with the reason, for a group that does not
/// divide the channels, strides / dilations / pads the kernels do not index
/// (window_attrs_ok), or a window that does not fit the input.
bool conv_shape(const KernelRequest& r, const Shape& x, const Shape& ws, ConvShape* c);

/// The fp32 kernels (fp32.cpp), each building `k` for request `r` or declining with
/// the reason. Conv with constant weights and fused Relu / Clip.
bool conv_fp32(const KernelRequest& r, Kernel* k);
/// Gemm, and MatMul by a constant 2-D weight (the input's leading dims as rows).
bool inner_product_fp32(const KernelRequest& r, Kernel* k);
/// MaxPool / AveragePool (MaxPool also on u8 / s8 codes).
bool pool_fp32(const KernelRequest& r, Kernel* k);
/// QLinearConv / QGemm / QLinearMatMul on oneDNN's int8 primitives (int8.cpp).
bool qconv_qgemm(const KernelRequest& r, Kernel* k);

}  // namespace qfx::runtime::onednn
