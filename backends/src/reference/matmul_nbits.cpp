// Reference kernels of MatMulNBits (block-wise 2/4/8-bit weights, matmul_nbits.h).
// Float activations: MatMul on the weight dequantized as DequantizeLinear
// dequantizes it, so a fused block-wise weight computes exactly what its
// DequantizeLinear + MatMul computed. accuracy_level 4: the int8-activation
// definition (quantize_row_blocks, int8_block_term) written out plainly.
#include <vector>

#include "../matmul_nbits.h"
#include "common.h"

namespace qfx::runtime {
namespace {

Kernel int8_activation_kernel(const ir::Node& n, const Meta& a, const ir::NBitsWeight& w) {
  const int64_t M = ir::nbits_rows(n, a, w);
  if (w.block_size > ir::kMaxInt8ActivationBlock)
    ref::bad_shape(n, "accuracy_level 4 takes blocks of at most " + std::to_string(ir::kMaxInt8ActivationBlock) + " codes (int32 sums)");
  Shape out = a.shape;
  out.back() = w.N;
  Kernel k;
  k.outputs = {{out, DType::kFloat32}};
  k.run = [w, M](const ref::In& in, const ref::Out& o) {
    std::vector<int8_t> q(static_cast<size_t>(w.blocks * w.block_size));
    std::vector<float> sa(static_cast<size_t>(w.blocks));
    std::vector<int32_t> qs(static_cast<size_t>(w.blocks));
    const float* S = w.scales.data<float>();
    for (int64_t m = 0; m < M; ++m) {
      ir::quantize_row_blocks(in[0]->data<float>() + m * w.K, w.K, w.block_size, q.data(), sa.data(), qs.data());
      for (int64_t c = 0; c < w.N; ++c) {
        float y = 0;
        for (int64_t b = 0; b < w.blocks; ++b) {
          int32_t dot = 0;
          for (int64_t k = b * w.block_size; k < std::min(w.K, (b + 1) * w.block_size); ++k) dot += w.code(c, k) * q[static_cast<size_t>(k)];
          const size_t i = static_cast<size_t>(c * w.blocks + b);
          y += ir::int8_block_term(dot, w.zero[i], qs[static_cast<size_t>(b)], S[i], sa[static_cast<size_t>(b)]);
        }
        o[0]->data<float>()[m * w.N + c] = y;
      }
    }
  };
  return k;
}

}  // namespace

void register_reference_matmul_nbits() {
  ref::add_reference({"MatMulNBits"}, [](const ir::Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
    const ir::NBitsWeight w = ir::read_nbits_weight(n, consts);
    if (ir::int8_activations(n)) return int8_activation_kernel(n, in[0], w);
    return ir::dequantized_matmul(n, in[0], w, "reference");
  });
}

}  // namespace qfx::runtime
