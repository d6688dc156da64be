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
void add_kernel(const std::string& backend, const std::string& op, const std::string& impl, KernelFactory factory);
/// register_backend without loading the built-ins first.
void add_backend(const BackendInfo& info);

// Built-in registrations, called once by the registry (builtin.cpp).
void register_reference_conv_gemm();
void register_reference_elementwise();
void register_reference_pooling();
void register_reference_shape();
void register_reference_quantize();
void register_onednn_kernels();
void register_simd_kernels();

/// The instruction set the vectorised kernels dispatch to for kernels built now:
/// "avx512", "avx2" or "baseline" (x86-64), the best this CPU has, capped by the
/// environment variable QFX_SIMD_ISA (tests force each path with it; asking for
/// more than the CPU has gives what it has).
std::string simd_isa();

/// Copies a channels-last [N, H, W, C] tensor of logical shape `shape` (NCHW) with
/// `elem` bytes per element into plain NCHW at `dst`.
void nhwc_to_nchw(const void* src, void* dst, const Shape& shape, size_t elem);

/// True if the CPU has VNNI (AVX512-VNNI, AVX-VNNI or AMX), where oneDNN's int8
/// convolution accumulates u8 x s8 products exactly in int32. Without it oneDNN sums
/// pairs of products in int16 (saturating unless |w| <= 64) and halves s8-source
/// weights, so the onednn backend declines such QLinearConv/QGemm (the reference runs them).
bool onednn_int8_exact(DType src, const Tensor& weights);

}  // namespace qfx::runtime
