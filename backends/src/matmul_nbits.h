// Internal: ONNX Runtime's com.microsoft MatMulNBits read as the standard ops it
// computes (a block-wise DequantizeLinear of its constant weight, then MatMul).
#pragma once

#include <string>

#include "ir.h"

namespace qfx::runtime::ir {

/// Appends to `g` what the MatMulNBits node `n` computes (ONNX Runtime's contrib op,
/// docs/ContribOperators.md): Y = A · dequantize(B)ᵀ (+ bias), written as
/// DequantizeLinear(axis 0, block_size) over a [K, N] uint8 initializer of the codes
/// (unpacked from B [N, k_blocks, block_size·bits/8], low bits first), the scales
/// [k_blocks, N] and the zero points (unpacked; 2^(bits-1) where absent), then MatMul,
/// then Add of the bias. bits 2, 4 and 8. B, scales, zero points and bias must be
/// initializers, and g_idx absent. Throws UnsupportedOpError naming `path` and the
/// node for anything else, DataError for shapes that do not fit K, N and block_size.
void lower_matmul_nbits(const Node& n, Graph& g, const std::string& path);

}  // namespace qfx::runtime::ir
