// Block-wise (group-wise) weights: one (scale, zero_point) per block of `block_size`
// consecutive input channels of a 2-D [C, K] weight, as ONNX DequantizeLinear-21's
// `block_size` (onnx.ai/onnx/operators/onnx__DequantizeLinear.html) and the group-wise
// weights of GPTQ (Frantar et al., 2022) and AWQ (Lin et al., 2023). The qparams are
// flat [C * nb] with nb = ceil(K / block_size), row-major over (channel, block).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace qfx::quant {

/// ceil(k / block_size): the blocks of one row of `k` elements (the last may be short).
/// Throws ArgumentError for block_size < 1.
int64_t block_count(int64_t k, int64_t block_size);

/// A [C, K] tensor as [C * nb, block_size] rows, one per block, the short last block
/// of each row padded with zeros (zeros change no block's min/max qparams: the
/// range always includes 0). Throws DataError naming `what` unless `w` is 2-D.
at::Tensor to_blocks(const at::Tensor& w, int64_t block_size, const char* what = "weight");

/// The inverse of `to_blocks`: [C * nb, block_size] back to [C, k] (the padding dropped).
at::Tensor from_blocks(const at::Tensor& blocks, int64_t channels, int64_t k);

/// Flat per-block values ([C * nb]) repeated over their block's elements: [C, k], to
/// broadcast against the [C, k] weight.
at::Tensor expand_blocks(const at::Tensor& per_block, int64_t channels, int64_t k, int64_t block_size);

/// Flat per-block values as ONNX DequantizeLinear-21's scale layout for a weight
/// [C, K] blocked along axis 1: [C, nb].
at::Tensor block_grid(const at::Tensor& per_block, int64_t channels);

}  // namespace qfx::quant
