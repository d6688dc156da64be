// com.microsoft MatMulNBits as DequantizeLinear(block_size) + MatMul (+ Add).
#include "matmul_nbits.h"

#include <cstdint>

#include "qfx/error.h"

namespace qfx::runtime::ir {

namespace {

// The `i`-th `bits`-wide value of packed bytes, low bits first.
uint8_t unpack(const uint8_t* p, int64_t i, int64_t bits) {
  const int64_t per_byte = 8 / bits, shift = (i % per_byte) * bits;
  return static_cast<uint8_t>((p[i / per_byte] >> shift) & ((1 << bits) - 1));
}

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
  const int64_t K = n.attr_i("K", 0), N = n.attr_i("N", 0), bits = n.attr_i("bits", 4), bs = n.attr_i("block_size", 0);
  const std::string where = path + ": " + n.label();
  if (bits != 2 && bits != 4 && bits != 8) throw UnsupportedOpError(where + ": bits " + std::to_string(bits) + " (2, 4 and 8 are read)");
  if (K < 1 || N < 1 || bs < 16 || (bs & (bs - 1)) != 0)
    throw DataError(where + ": K " + std::to_string(K) + ", N " + std::to_string(N) + " and block_size " + std::to_string(bs) +
                    " must be positive, block_size a power of two >= 16");
  if (!has(0) || !has(1) || !has(2)) throw DataError(where + ": needs A, B and scales");
  if (has(4)) throw UnsupportedOpError(where + ": g_idx (act-order column groups) is not read");
  const int64_t blocks = (K + bs - 1) / bs, blob = bs * bits / 8;
  const Tensor& B = constant(n, g, 1, "weight B", path);
  const Tensor& S = constant(n, g, 2, "scales", path);
  if (B.dtype() != DType::kUInt8 || B.numel() != N * blocks * blob)
    throw DataError(where + ": B must be uint8 [N, k_blocks, blob] = [" + std::to_string(N) + ", " + std::to_string(blocks) +
                    ", " + std::to_string(blob) + "]");
  if (S.dtype() != DType::kFloat32 || S.numel() != N * blocks)
    throw DataError(where + ": scales must be float32 with N * k_blocks = " + std::to_string(N * blocks) + " values");
  const uint8_t* zp = nullptr;
  const int64_t zp_row = (blocks * bits + 7) / 8;  // packed zero-point bytes per output row
  if (has(3)) {
    const Tensor& Z = constant(n, g, 3, "zero points", path);
    if (Z.dtype() != DType::kUInt8 || Z.numel() != N * zp_row)
      throw UnsupportedOpError(where + ": zero points must be packed uint8 [N, " + std::to_string(zp_row) + "]");
    zp = Z.data<uint8_t>();
  }
  const std::string base = n.name + "_nbits";
  Tensor codes({K, N}, DType::kUInt8), scale({blocks, N}, DType::kFloat32), zero({blocks, N}, DType::kUInt8);
  for (int64_t o = 0; o < N; ++o) {
    const uint8_t* row = B.data<uint8_t>() + o * blocks * blob;
    for (int64_t k = 0; k < K; ++k) codes.data<uint8_t>()[k * N + o] = unpack(row, k, bits);
    for (int64_t b = 0; b < blocks; ++b) {
      scale.data<float>()[b * N + o] = S.data<float>()[o * blocks + b];
      zero.data<uint8_t>()[b * N + o] =
          zp ? unpack(zp + o * zp_row, b, bits) : static_cast<uint8_t>(1 << (bits - 1));
    }
  }
  g.initializers[base + "_codes"] = codes;
  g.initializers[base + "_scale"] = scale;
  g.initializers[base + "_zero_point"] = zero;
  Node dq;
  dq.op = "DequantizeLinear";
  dq.name = base + "_dequantize";
  dq.inputs = {base + "_codes", base + "_scale", base + "_zero_point"};
  dq.outputs = {base + "_weight"};
  dq.attrs["axis"].kind = Attr::Kind::kInt;
  dq.attrs["axis"].i = 0;
  dq.attrs["block_size"].kind = Attr::Kind::kInt;
  dq.attrs["block_size"].i = bs;
  Node mm;
  mm.op = "MatMul";
  mm.name = n.name;
  mm.inputs = {n.inputs[0], dq.outputs[0]};
  mm.outputs = n.outputs;
  g.nodes.push_back(std::move(dq));
  if (has(5)) {
    constant(n, g, 5, "bias", path);
    mm.outputs = {base + "_matmul"};
    Node add;
    add.op = "Add";
    add.name = base + "_bias";
    add.inputs = {mm.outputs[0], n.inputs[5]};
    add.outputs = n.outputs;
    g.nodes.push_back(std::move(mm));
    g.nodes.push_back(std::move(add));
    return;
  }
  g.nodes.push_back(std::move(mm));
}

}  // namespace qfx::runtime::ir
