#include "qfx/quant/block_quant.h"

#include <ATen/ATen.h>

#include <string>

#include "qfx/error.h"

namespace qfx::quant {

int64_t block_count(int64_t k, int64_t block_size) {
  if (block_size < 1) throw ArgumentError("block_size must be positive, got " + std::to_string(block_size));
  return (k + block_size - 1) / block_size;
}

at::Tensor to_blocks(const at::Tensor& w, int64_t block_size, const char* what) {
  if (w.dim() != 2)
    throw DataError(std::string(what) + ": block-wise quantization needs a 2-D [out, in] weight, got rank " +
                    std::to_string(w.dim()));
  const int64_t c = w.size(0), k = w.size(1), nb = block_count(k, block_size);
  const at::Tensor padded = nb * block_size == k ? w : at::constant_pad_nd(w, {0, nb * block_size - k}, 0.0);
  return padded.reshape({c * nb, block_size});
}

at::Tensor from_blocks(const at::Tensor& blocks, int64_t channels, int64_t k) {
  return blocks.reshape({channels, -1}).narrow(1, 0, k);
}

at::Tensor expand_blocks(const at::Tensor& per_block, int64_t channels, int64_t k, int64_t block_size) {
  const int64_t nb = block_count(k, block_size);
  if (per_block.numel() != channels * nb)
    throw ArgumentError("block-wise qparams: " + std::to_string(per_block.numel()) + " values for a [" +
                        std::to_string(channels) + ", " + std::to_string(k) + "] weight in blocks of " +
                        std::to_string(block_size) + " (expected " + std::to_string(channels * nb) + ")");
  return per_block.reshape({channels, nb}).repeat_interleave(block_size, 1).narrow(1, 0, k);
}

at::Tensor block_grid(const at::Tensor& per_block, int64_t channels) { return per_block.reshape({channels, -1}); }

}  // namespace qfx::quant
