// MatMulNBits: ONNX Runtime's node read into the runtime's, its constant weight,
// the int8-activation definition's pieces, and the matmul on the dequantized weight.
#include "matmul_nbits.h"

#include <cstdint>

#include <algorithm>
#include <cmath>
#include <memory>

#include "kernels.h"
#include "qfx/error.h"
#include "reference/common.h"

namespace qfx::runtime::ir {

namespace {

const Tensor& constant(const Node& n, const Graph& g, size_t i, const char* what, const std::string& path) {
  auto it = g.initializers.find(n.inputs[i]);
  if (it == g.initializers.end())
    throw UnsupportedOpError(path + ": " + n.label() + ": its " + what + " '" + n.inputs[i] +
                             "' is computed at run time; qfx runs MatMulNBits with constant weights");
  return it->second;
}

}  // namespace

void lower_matmul_nbits(const Node& n, Graph& g, const std::string& path) {
  auto has = [&](size_t i) { return n.inputs.size() > i && !n.inputs[i].empty(); };
  const std::string where = path + ": " + n.label();
  const int64_t bs = n.attr_i("block_size", 0);
  if (bs < 16 || (bs & (bs - 1)) != 0)
    throw DataError(where + ": block_size " + std::to_string(bs) + " must be a power of two >= 16");
  if (!has(0) || !has(1) || !has(2)) throw DataError(where + ": needs A, B and scales");
  if (has(4)) throw UnsupportedOpError(where + ": g_idx (act-order column groups) is not read");
  static const char* const what[] = {"", "weight B", "scales", "zero points"};
  std::vector<const Tensor*> consts(4, nullptr);
  for (size_t i = 1; i < 4; ++i)
    if (has(i)) consts[i] = &constant(n, g, i, what[i], path);
  if (has(5)) constant(n, g, 5, "bias", path);
  Node mm = n;  // the runtime's MatMulNBits: A, B, scales, zero points
  mm.inputs.resize(std::min<size_t>(n.inputs.size(), 4));
  read_nbits_weight(mm, consts, where);  // its sizes, checked now with the file's name
  if (!has(5)) {
    g.nodes.push_back(std::move(mm));
    return;
  }
  mm.outputs = {n.name + "_nbits_matmul"};
  Node add;
  add.op = "Add";
  add.name = n.name + "_nbits_bias";
  add.inputs = {mm.outputs[0], n.inputs[5]};
  add.outputs = n.outputs;
  g.nodes.push_back(std::move(mm));
  g.nodes.push_back(std::move(add));
}

uint8_t NBitsWeight::code(int64_t n, int64_t k) const {
  return packed_code(B.data<uint8_t>() + (n * blocks + k / block_size) * blob, k % block_size, bits);
}

Tensor NBitsWeight::dequantized() const {
  Tensor w({K, N}, DType::kFloat32);
  const float* s = scales.data<float>();
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const size_t b = static_cast<size_t>(n * blocks + k / block_size);
      w.data<float>()[k * N + n] = static_cast<float>(int32_t{code(n, k)} - int32_t{zero[b]}) * s[b];
    }
  return w;
}

NBitsWeight read_nbits_weight(const Node& n, const std::vector<const Tensor*>& consts, const std::string& where) {
  const std::string at = where.empty() ? n.label() : where;
  auto given = [&](size_t i) { return n.inputs.size() > i && !n.inputs[i].empty(); };
  for (size_t i = 1; i < 4; ++i)
    if (given(i) && (consts.size() <= i || !consts[i]))
      throw UnsupportedOpError(at + ": input " + std::to_string(i) + " '" + n.inputs[i] +
                               "' is computed at run time; MatMulNBits runs with constant weights");
  if (given(4) || given(5)) throw UnsupportedOpError(at + ": g_idx and bias inputs are not read here");
  if (!given(1) || !given(2)) throw DataError(at + ": needs A, B and scales");
  NBitsWeight w;
  w.K = n.attr_i("K", 0);
  w.N = n.attr_i("N", 0);
  w.bits = n.attr_i("bits", 4);
  w.block_size = n.attr_i("block_size", 0);
  if (w.bits != 2 && w.bits != 4 && w.bits != 8) throw UnsupportedOpError(at + ": bits " + std::to_string(w.bits) + " (2, 4 and 8 are read)");
  const int64_t big = int64_t{1} << 31;  // products of these stay far inside int64
  if (w.K < 1 || w.N < 1 || w.block_size < 1 || w.K > big || w.N > big || w.block_size > big ||
      (w.block_size * w.bits) % 8 != 0)
    throw DataError(at + ": K " + std::to_string(w.K) + ", N " + std::to_string(w.N) + " and block_size " +
                    std::to_string(w.block_size) + " must be in [1, 2^31], block_size * bits a multiple of 8");
  w.blocks = (w.K + w.block_size - 1) / w.block_size;
  w.blob = w.block_size * w.bits / 8;
  w.B = *consts[1];
  w.scales = *consts[2];
  if (w.B.dtype() != DType::kUInt8 || w.B.numel() != w.N * w.blocks * w.blob)
    throw DataError(at + ": B must be uint8 [N, blocks, blob] = [" + std::to_string(w.N) + ", " + std::to_string(w.blocks) +
                    ", " + std::to_string(w.blob) + "], is " + w.B.describe());
  if (w.scales.dtype() != DType::kFloat32 || w.scales.numel() != w.N * w.blocks)
    throw DataError(at + ": scales must be float32 with N * blocks = " + std::to_string(w.N * w.blocks) + " values, are " +
                    w.scales.describe());
  const int64_t zp_row = (w.blocks * w.bits + 7) / 8;
  if (given(3) && (consts[3]->dtype() != DType::kUInt8 || consts[3]->numel() != w.N * zp_row))
    throw UnsupportedOpError(at + ": zero points must be packed uint8 [N, " + std::to_string(zp_row) + "], are " + consts[3]->describe());
  w.zero.resize(static_cast<size_t>(w.N * w.blocks), static_cast<uint8_t>(1 << (w.bits - 1)));
  if (given(3))
    for (int64_t o = 0; o < w.N; ++o)
      for (int64_t b = 0; b < w.blocks; ++b)
        w.zero[static_cast<size_t>(o * w.blocks + b)] = packed_code(consts[3]->data<uint8_t>() + o * zp_row, b, w.bits);
  return w;
}

void quantize_row_blocks(const float* a, int64_t K, int64_t bs, int8_t* q, float* scale, int32_t* sum) {
  const int64_t blocks = (K + bs - 1) / bs;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t k0 = b * bs, len = std::min(bs, K - k0);
    float m = 0;
    for (int64_t k = 0; k < len; ++k) m = std::max(m, std::fabs(a[k0 + k]));  // NaN is skipped
    const float s = m > 0 && std::isfinite(m) ? m / 127.0f : 1.0f;
    int32_t t = 0;
    for (int64_t k = 0; k < bs; ++k) {
      const int32_t v = k < len ? hd::quantize_value(a[k0 + k], s, 0, -127, 127) : 0;
      q[k0 + k] = static_cast<int8_t>(v);
      t += v;
    }
    scale[b] = s;
    sum[b] = t;
  }
}

int64_t nbits_rows(const Node& n, const Meta& a, const NBitsWeight& w) {
  if (a.shape.empty() || a.shape.back() != w.K)
    ref::bad_shape(n, "A's last dimension must be K = " + std::to_string(w.K) + ", A is " + ref::shape_str(a.shape));
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < a.shape.size(); ++d) rows *= a.shape[d];
  return rows;
}

Kernel dequantized_matmul(const Node& n, const Meta& a, const NBitsWeight& w, const std::string& backend) {
  nbits_rows(n, a, w);
  auto weight = std::make_shared<Tensor>(w.dequantized());
  Node mm;
  mm.op = "MatMul";
  mm.name = n.name;
  mm.inputs = {n.inputs[0], n.name + "_dequantized"};
  mm.outputs = n.outputs;
  Kernel inner = make_kernel(mm, {a, Meta{weight->shape(), DType::kFloat32}}, {nullptr, weight.get()}, backend);
  Kernel k = inner;
  k.run = [inner, weight](const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) {
    inner.run({in[0], weight.get()}, out);
  };
  return k;
}

}  // namespace qfx::runtime::ir
