// Internal: what the QDQ matcher (qdq.cpp) and its integer-only groups
// (qdq_integer_only.cpp) share: the graph's producers and uses, the
// DequantizeLinear feeding a value, the QuantizeLinear ending a group, and float
// regions of elementwise ops on one quantized value.
#pragma once

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernels.h"

namespace qfx::runtime::ir::qdq {

/// Per-tensor 8-bit (uint8 or int8) qparams: what every int8 form but the 16x8 ones takes.
inline bool eight_bit_per_tensor(const QInfo& q) {
  return !q.per_channel() && (q.dtype == DType::kUInt8 || q.dtype == DType::kInt8);
}

/// A Clip's constant bounds in real units (an absent bound unbounded, +-3.4e38);
/// false for a bound computed at run time (the Clip then cannot be fused).
inline bool clip_bounds(const Graph& g, const Node& clip, float* lo, float* hi) {
  *lo = -3.4e38f;
  *hi = 3.4e38f;
  return clip_bound(g, clip, 1, lo) && clip_bound(g, clip, 2, hi);
}

struct Ctx {
  Graph& g;
  std::map<std::string, size_t> producer;
  std::map<std::string, int> uses;
  std::set<std::string> graph_outputs;
  std::vector<bool> removed;

  explicit Ctx(Graph& gr) : g(gr), removed(gr.nodes.size(), false) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const auto& o : g.nodes[i].outputs) producer[o] = i;
      for (const auto& in : g.nodes[i].inputs)
        if (!in.empty()) ++uses[in];
    }
    for (const auto& o : g.outputs) graph_outputs.insert(o.name);
  }

  const Tensor* init(const std::string& name) const {
    auto it = g.initializers.find(name);
    return it == g.initializers.end() ? nullptr : &it->second;
  }

  // qparams of a Q/DQ node from its constant scale / zero point inputs; a group
  // with a non-positive or non-finite scale stays float, and so does a blocked
  // (opset 21) node or a QuantizeLinear to a 4-bit or uint16 type (qdq_refusal).
  std::optional<QInfo> qparams(const Node& n, DType fallback) const {
    if (!qdq_refusal(n).empty()) return std::nullopt;
    const Tensor* s = n.inputs.size() > 1 ? init(n.inputs[1]) : nullptr;
    const bool has_zp = n.inputs.size() > 2 && !n.inputs[2].empty();
    const Tensor* z = has_zp ? init(n.inputs[2]) : nullptr;
    if (!s || (has_zp && !z)) return std::nullopt;
    std::string why;
    auto q = read_qparams(*s, z, fallback, n.attr_i("axis", 1), &why);
    if (!q) return std::nullopt;
    for (float v : q->scale)
      if (!(v > 0.0f) || !std::isfinite(v)) return std::nullopt;
    return q;
  }

  // The DequantizeLinear producing `value`: (node index, its quantized input, qparams).
  struct DQ {
    size_t node;
    std::string quantized;
    QInfo q;
  };
  std::optional<DQ> dq(const std::string& value) const {
    auto it = producer.find(value);
    if (it == producer.end() || removed[it->second]) return std::nullopt;
    const Node& n = g.nodes[it->second];
    if (n.op != "DequantizeLinear") return std::nullopt;
    auto q = qparams(n, DType::kUInt8);
    if (!q) return std::nullopt;
    return DQ{it->second, n.inputs[0], *q};
  }

  // The single consumer of `value` (nullopt if several, none, or a graph output).
  std::optional<size_t> only_consumer(const std::string& value) const {
    if (graph_outputs.count(value) || uses.count(value) == 0 || uses.at(value) != 1) return std::nullopt;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (removed[i]) continue;
      for (const auto& in : g.nodes[i].inputs)
        if (in == value) return i;
    }
    return std::nullopt;
  }

  // Follows `node`'s output through an optional Relu/Clip to a QuantizeLinear.
  struct Tail {
    std::vector<size_t> absorbed;  // act node (if any) and the Q node
    std::string output;
    QInfo q;
    std::string act;
    float lo = 0, hi = 0;
  };
  std::optional<Tail> tail(size_t node, bool allow_act) const {
    Tail t;
    std::string v = g.nodes[node].outputs.at(0);
    auto c = only_consumer(v);
    if (!c) return std::nullopt;
    const Node* cn = &g.nodes[*c];
    if (allow_act && (cn->op == "Relu" || cn->op == "Clip")) {
      if (cn->op == "Clip" && !clip_bounds(g, *cn, &t.lo, &t.hi)) return std::nullopt;
      t.act = cn->op;
      t.absorbed.push_back(*c);
      c = only_consumer(cn->outputs.at(0));
      if (!c) return std::nullopt;
      cn = &g.nodes[*c];
    }
    if (cn->op != "QuantizeLinear") return std::nullopt;
    auto q = qparams(*cn, DType::kUInt8);
    if (!q || q->per_channel() || q->dtype == DType::kInt32) return std::nullopt;
    t.absorbed.push_back(*c);
    t.output = cn->outputs.at(0);
    t.q = *q;
    return t;
  }

  // True if `node`'s output is quantized to int16 (through an optional activation).
  bool wide_tail(size_t node) const {
    auto t = tail(node, true);
    return t && t->q.dtype == DType::kInt16;
  }

  void replace(size_t i, Node fused, const Tail& t) {
    fused.out_q = t.q;
    fused.fused_act = t.act;
    fused.clip_lo = t.lo;
    fused.clip_hi = t.hi;
    fused.outputs = {t.output};
    for (size_t a : t.absorbed) removed[a] = true;
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty()) --uses[in];
    for (const auto& in : fused.inputs)
      if (!in.empty()) ++uses[in];
    g.nodes[i] = std::move(fused);
  }

  // The reads of `nodes` go away with them (nodes a replacement absorbs beyond its
  // first node, whose reads `replace` settles).
  void release_inputs(const std::vector<size_t>& nodes) {
    for (size_t k : nodes)
      for (const auto& in : g.nodes[k].inputs)
        if (!in.empty()) --uses[in];
  }

  // Replaces a unary region (unary_region: node i first, the QuantizeLinear last,
  // with output qparams `yq`) by the one node `fused`.
  void replace_region(size_t i, Node fused, const std::vector<size_t>& region, const QInfo& yq) {
    Tail t;
    t.absorbed.assign(region.begin() + 1, region.end());
    t.output = g.nodes[region.back()].outputs.at(0);
    t.q = yq;
    release_inputs(std::vector<size_t>(region.begin() + 1, region.end() - 1));
    replace(i, std::move(fused), t);
  }
};

/// The 256 codes of 8-bit per-tensor `xq` dequantized, lowest code first (float32 [256]).
Tensor dequantized_codes(const QInfo& xq);

/// True for the elementwise float ops a region may hold (each output element depends
/// only on the same element of its inputs).
bool elementwise_float_op(const std::string& op);

/// A float region that computes a function of one 8-bit value element by element
/// (SiLU exported as x * Sigmoid(x), HardSwish as x * HardSigmoid(x), GELU's chain):
/// the nodes from `first` on whose inputs are the dequantized value `v`, outputs of
/// the region, or scalar constants, ending in one QuantizeLinear that alone reads the
/// region's result. Returns the region's nodes (the QuantizeLinear last), or nothing.
std::optional<std::vector<size_t>> unary_region(const Graph& g, const std::vector<bool>& removed,
                                                const std::map<std::string, int>& uses, const std::set<std::string>& outs,
                                                const std::string& v, size_t first);

/// The region's function (all its nodes but the final QuantizeLinear) run node by
/// node with the reference float kernels on float32 `x` standing for `v`.
Tensor region_values(const Graph& g, const std::vector<size_t>& region, const std::string& v, const Tensor& x);

/// The integer-only groups of the target's Arithmetic::integer_only starting at node
/// `i`, whose first input `d0` dequantizes: GELU (a unary region computing it),
/// Softmax, LayerNormalization (one node or the opset-14 decomposition) up to a
/// QuantizeLinear, replaced by QIntGelu / QIntSoftmax / QIntLayerNorm. Returns true
/// if it replaced one; a group it does not match is left for the other rules.
bool fuse_integer_only(Ctx& c, size_t i, const Ctx::DQ& d0);

/// Under Arithmetic::softmax_fixed_point, a DequantizeLinear -> Softmax -> QuantizeLinear
/// group at node `i` (8-bit per-tensor codes in and out, output scale 1/256 and zero
/// point the lowest code) becomes one QLinearSoftmax (attribute axis). Returns true if it replaced one.
bool fuse_softmax(Ctx& c, size_t i, const Ctx::DQ& d0);

}  // namespace qfx::runtime::ir::qdq
