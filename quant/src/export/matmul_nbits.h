// Internal: block-wise 4-bit weights in ONNX Runtime's com.microsoft MatMulNBits form.
#pragma once

#include <onnx/onnx_pb.h>

namespace qfx::quant::detail {

/// Rewrites every MatMul of `m` whose weight (input 1) is a DequantizeLinear read
/// only by it, over a constant INT4 / UINT4 [K, N] initializer with `axis` 0 and a
/// power-of-two `block_size` of at least 16, as one com.microsoft MatMulNBits
/// (ONNX Runtime's contrib op, docs/ContribOperators.md): B the unsigned codes
/// (INT4 codes + 8) packed [N, k_blocks, block_size / 2], low nibble first; scales
/// [N, k_blocks]; zero points packed [N, ceil(k_blocks / 2)] unless all are 8 (the
/// op's default); `accuracy_level` as given (1: A stays float32; 4: int8 compute).
/// The codes keep their initializer's name (now B), as do the scales. Other
/// DequantizeLinear nodes stay. Returns how many were rewritten (and adds the
/// com.microsoft opset when any).
int use_matmul_nbits(onnx::ModelProto& m, int accuracy_level);

}  // namespace qfx::quant::detail
