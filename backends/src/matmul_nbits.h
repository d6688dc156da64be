// Internal: ONNX Runtime's com.microsoft MatMulNBits read as the standard ops it
// computes (a block-wise DequantizeLinear of its constant weight, then MatMul), and
// the runtime's MatMulNBits kernels' shared pieces.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir.h"

namespace qfx::runtime::ir {

/// The `i`-th `bits`-wide value (2, 4 or 8) of packed bytes `p`, low bits first (the
/// packing of MatMulNBits' B and zero points).
inline uint8_t packed_code(const uint8_t* p, int64_t i, int64_t bits) {
  const int64_t per_byte = 8 / bits, shift = (i % per_byte) * bits;
  return static_cast<uint8_t>((p[i / per_byte] >> shift) & ((1 << bits) - 1));
}

/// Appends ONNX Runtime's com.microsoft MatMulNBits node `n` (docs/ContribOperators.md:
/// Y = A · dequantize(B)ᵀ (+ bias)) to `g` as the runtime's MatMulNBits (inputs A, B,
/// scales, zero points; attributes kept, accuracy_level included), followed by an Add
/// of the bias where it has one. bits 2, 4 and 8; block_size a power of two >= 16. B,
/// scales, zero points and bias must be initializers, and g_idx absent. Throws
/// UnsupportedOpError naming `path` and the node for anything else, DataError for
/// shapes that do not fit K, N and block_size (read_nbits_weight's checks).
void lower_matmul_nbits(const Node& n, Graph& g, const std::string& path);

/// The constant weight of a runtime MatMulNBits node, in ONNX Runtime's layout:
/// inputs A (float32 [..., K]), B (uint8 [N, blocks, blob], the codes of output
/// column n along K, `bits` wide, low bits first, blob = block_size * bits / 8),
/// scales (float32 [N, blocks]), zero points (optional, uint8 [N, ceil(blocks * bits
/// / 8)], packed like B; 2^(bits-1) where absent); attributes K, N, bits,
/// block_size. The last block may be short (its codes past K are padding). The
/// weight is W[k, n] = (code(n, k) - zero(n, k / block_size)) * scale(n, k / block_size).
struct NBitsWeight {
  int64_t K = 0, N = 0, bits = 4, block_size = 0, blocks = 0, blob = 0;
  Tensor B, scales;           ///< the node's constants (shared storage, not copies)
  std::vector<uint8_t> zero;  ///< zero points unpacked, [N, blocks]
  /// Code k (< K) of output column n.
  uint8_t code(int64_t n, int64_t k) const;
  /// W as float32 [K, N], each element computed as DequantizeLinear computes it:
  /// float(code - zero) * scale.
  Tensor dequantized() const;
};

/// Reads MatMulNBits node `n`'s constants (`consts` by input index). Throws
/// UnsupportedOpError for inputs computed at run time, g_idx or a bias input, bits
/// other than 2, 4, 8, zero points that are not packed uint8 of their size;
/// DataError for sizes that do not fit K, N and block_size (block_size >= 1 with
/// block_size * bits a multiple of 8). Messages start with `where` (default: the
/// node's label).
NBitsWeight read_nbits_weight(const Node& n, const std::vector<const Tensor*>& consts, const std::string& where = "");

/// The rows of A (the product of its leading dimensions) for MatMulNBits `n`. Throws
/// DataError naming the node when A's last dimension (metadata `a`) is not K.
int64_t nbits_rows(const Node& n, const Meta& a, const NBitsWeight& w);

/// accuracy_level 4's largest block: its int32 dot products (at most 255 * 127 per
/// code) stay exact.
inline constexpr int64_t kMaxInt8ActivationBlock = 65536;

/// True when MatMulNBits `n` computes with int8 activations: `accuracy_level` 4, as
/// ONNX Runtime names it ("int8 compute"). Every other level (0 unset, 1 fp32, 2 fp16,
/// 3 bf16) computes in float32 on the dequantized weight.
inline bool int8_activations(const Node& n) { return n.attr_i("accuracy_level", 0) == 4; }

/// accuracy_level 4's activation quantization: row `a` (K floats) per block of `bs`
/// values (the weight's blocks along K), symmetric int8: scale_b = max|a| / 127 over
/// the block (1 for an all-zero block), q = round_half_even(a / scale_b) in
/// [-127, 127] (NaN to 0), sum_b = the sum of the block's q. `q` holds blocks * bs
/// values (zeros past K); `scale` and `sum` one per block.
void quantize_row_blocks(const float* a, int64_t K, int64_t bs, int8_t* q, float* scale, int32_t* sum);

/// One output of accuracy_level 4, the definition every kernel computes bit for bit:
/// y = sum over blocks b, in order, in float32 from 0, of
/// float(dot_b - zero(n, b) * sum_b) * (scale(n, b) * a_scale_b), with dot_b the exact
/// int32 sum over the block of code(n, k) * q_k.
inline float int8_block_term(int32_t dot, int32_t zero, int32_t qsum, float w_scale, float a_scale) {
  return static_cast<float>(dot - zero * qsum) * (w_scale * a_scale);
}

/// A kernel for MatMulNBits `n` (A's metadata `a`, A's last dimension K) that
/// computes MatMul on the dequantized weight [K, N] (made once, when built) with
/// `backend`'s MatMul kernels: exactly what the unfused DequantizeLinear + MatMul
/// computes there. Throws DataError naming the node when A's last dimension is not K.
Kernel dequantized_matmul(const Node& n, const Meta& a, const NBitsWeight& w, const std::string& backend);

/// Rewrites each float MatMul whose B is a block-wise DequantizeLinear of constants
/// (opset 21: axis 0 of 2-D [K, N] codes, scales [blocks, N], zero points alike or
/// absent) into a MatMulNBits node over the same codes packed 4 bits wide where
/// every code and zero point fits 16 consecutive values (INT4 / UINT4 weights), else
/// 8 bits wide; the dequantized weights are exactly the DequantizeLinear's, so
/// kernels can read 4-bit weights instead of a float copy. A DequantizeLinear read by
/// anything but MatMuls' B, or whose output is a graph output or in `keep`, stays.
void fuse_blocked_matmuls(Graph& g, const std::set<std::string>& keep);

}  // namespace qfx::runtime::ir
