// Internal: DequantizeLinear of constants as the reference kernel computes it, for
// writers that fold a model's constant DequantizeLinear nodes (the AIMET writer).
#pragma once

#include <vector>

#include "qfx/runtime/kernel.h"

namespace qfx::runtime {

/// The float32 result of DequantizeLinear node `n` on constant codes `x`, as ONNX
/// defines it per tensor, per axis or per block (opset 21); `consts` holds the node's
/// inputs by index (codes, scale, zero point; nullptr where absent). Throws DataError
/// naming the node for qparams that do not fit `x`.
Tensor dequantize_constant(const ir::Node& n, const Tensor& x, const std::vector<const Tensor*>& consts);

}  // namespace qfx::runtime
