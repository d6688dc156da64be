// A float MatMul by a block-wise DequantizeLinear of constant codes becomes one
// MatMulNBits node, so the weights stay 4 (or 8) bits wide in the plan.
#include <algorithm>
#include <map>

#include "matmul_nbits.h"

namespace qfx::runtime::ir {
namespace {

// Where each value is read: (node index, input index).
std::map<std::string, std::vector<std::pair<size_t, size_t>>> readers(const Graph& g) {
  std::map<std::string, std::vector<std::pair<size_t, size_t>>> r;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (size_t j = 0; j < g.nodes[i].inputs.size(); ++j)
      if (!g.nodes[i].inputs[j].empty()) r[g.nodes[i].inputs[j]].emplace_back(i, j);
  return r;
}

const Tensor* initializer(const Graph& g, const Node& n, size_t i) {
  if (n.inputs.size() <= i || n.inputs[i].empty()) return nullptr;
  auto it = g.initializers.find(n.inputs[i]);
  return it == g.initializers.end() ? nullptr : &it->second;
}

// A code of 8-bit storage as a signed integer.
int32_t code_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt8 ? int32_t{t.data<int8_t>()[i]} : int32_t{t.data<uint8_t>()[i]};
}

// The packed form of one DequantizeLinear: B, scales and zero points as
// MatMulNBits takes them (matmul_nbits.h), or empty B when the node does not fit.
struct Packed {
  Tensor B, scales, zero;
  int64_t K = 0, N = 0, bits = 0, block = 0;
};

// True if every code and zero point lies in [lo, hi].
bool fits(const Tensor& c, const Tensor* z, int32_t lo, int32_t hi) {
  for (int64_t i = 0; i < c.numel(); ++i)
    if (code_at(c, i) < lo || code_at(c, i) > hi) return false;
  if (z)
    for (int64_t i = 0; i < z->numel(); ++i)
      if (code_at(*z, i) < lo || code_at(*z, i) > hi) return false;
  return true;
}

void put(uint8_t* p, int64_t i, int64_t bits, int32_t v) {
  const int64_t per = 8 / bits, shift = (i % per) * bits;
  p[i / per] = static_cast<uint8_t>(p[i / per] | (v << shift));
}

Packed pack(const Graph& g, const Node& dq) {
  Packed p;
  const Tensor *c = initializer(g, dq, 0), *s = initializer(g, dq, 1), *z = initializer(g, dq, 2);
  const bool has_z = dq.inputs.size() > 2 && !dq.inputs[2].empty();
  if (!c || !s || (has_z && !z) || c->shape().size() != 2) return p;
  if (c->dtype() != DType::kInt8 && c->dtype() != DType::kUInt8) return p;
  const int64_t axis = dq.attr_i("axis", 1), K = c->shape()[0], N = c->shape()[1];
  // A block of K or more codes is one block of K: the same weights, no padding.
  const int64_t block = std::min(dq.attr_i("block_size", 0), K);
  if ((axis != 0 && axis != -2) || block < 1 || K < 1 || N < 1) return p;
  const int64_t blocks = (K + block - 1) / block;
  if (s->dtype() != DType::kFloat32 || s->shape() != Shape{blocks, N}) return p;
  if (z && (z->dtype() != c->dtype() || z->shape() != s->shape())) return p;
  const bool sign = c->dtype() == DType::kInt8;
  const bool four = block % 2 == 0 && fits(*c, z, sign ? -8 : 0, sign ? 7 : 15);
  p.bits = four ? 4 : 8;
  const int32_t off = sign ? (four ? 8 : 128) : 0;
  const int64_t blob = block * p.bits / 8, zrow = (blocks * p.bits + 7) / 8;
  p.B = Tensor({N, blocks, blob}, DType::kUInt8);
  p.scales = Tensor({N, blocks}, DType::kFloat32);
  p.zero = Tensor({N, zrow}, DType::kUInt8);
  std::fill(p.B.data<uint8_t>(), p.B.data<uint8_t>() + p.B.numel(), uint8_t{0});
  std::fill(p.zero.data<uint8_t>(), p.zero.data<uint8_t>() + p.zero.numel(), uint8_t{0});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < blocks; ++b) {
      const int32_t zv = (z ? code_at(*z, b * N + n) : 0) + off;
      p.scales.data<float>()[n * blocks + b] = s->data<float>()[b * N + n];
      put(p.zero.data<uint8_t>() + n * zrow, b, p.bits, zv);
      uint8_t* row = p.B.data<uint8_t>() + (n * blocks + b) * blob;
      for (int64_t k = 0; k < block; ++k)  // past K: the zero point, so padding is 0
        put(row, k, p.bits, b * block + k < K ? code_at(*c, (b * block + k) * N + n) + off : zv);
    }
  p.K = K;
  p.N = N;
  p.block = block;
  return p;
}

std::string fresh(const Graph& g, const std::string& base) {
  std::string name = base;
  for (int i = 1; g.initializers.count(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

}  // namespace

void fuse_blocked_matmuls(Graph& g, const std::set<std::string>& keep) {
  std::set<std::string> outputs = keep;
  for (const auto& o : g.outputs) outputs.insert(o.name);
  auto read = readers(g);
  std::vector<bool> drop(g.nodes.size(), false);
  std::set<std::string> maybe_unread;
  for (size_t d = 0; d < g.nodes.size(); ++d) {
    const Node& dq = g.nodes[d];
    if (dq.op != "DequantizeLinear" || dq.attr_i("block_size", 0) < 1 || dq.outputs.size() != 1 || outputs.count(dq.outputs[0])) continue;
    const auto& rd = read[dq.outputs[0]];
    const bool only_b = !rd.empty() && std::all_of(rd.begin(), rd.end(), [&](const auto& r) {
      const Node& m = g.nodes[r.first];
      return m.op == "MatMul" && r.second == 1 && m.inputs.size() == 2 && m.inputs[0] != dq.outputs[0];
    });
    if (!only_b) continue;
    Packed p = pack(g, dq);
    if (p.bits == 0) continue;
    const std::string b = fresh(g, dq.name + "_nbits_B");
    g.initializers[b] = p.B;
    const std::string s = fresh(g, dq.name + "_nbits_scales");
    g.initializers[s] = p.scales;
    const std::string z = fresh(g, dq.name + "_nbits_zero_points");
    g.initializers[z] = p.zero;
    for (const auto& r : rd) {
      Node& m = g.nodes[r.first];
      m.op = "MatMulNBits";
      m.inputs = {m.inputs[0], b, s, z};
      m.attrs = {{"K", int_attr(p.K)}, {"N", int_attr(p.N)}, {"bits", int_attr(p.bits)}, {"block_size", int_attr(p.block)}};
    }
    drop[d] = true;
    maybe_unread.insert(dq.inputs.begin(), dq.inputs.end());
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  read = readers(g);
  for (const auto& v : maybe_unread)
    if (!read.count(v) && !outputs.count(v)) g.initializers.erase(v);
}

}  // namespace qfx::runtime::ir
