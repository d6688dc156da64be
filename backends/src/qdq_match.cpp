// The QDQ matcher's shared pieces (qdq_match.h): float regions on one quantized value.
#include "qdq_match.h"

#include <algorithm>

#include "qfx/runtime/op_schema.h"

namespace qfx::runtime::ir::qdq {

Tensor dequantized_codes(const QInfo& xq) {
  const int lo = xq.dtype == DType::kInt8 ? -128 : 0;
  Tensor x({256}, DType::kFloat32);
  for (int i = 0; i < 256; ++i)
    x.data<float>()[i] = static_cast<float>(static_cast<int64_t>(lo + i) - static_cast<int64_t>(xq.zero_point[0])) * xq.scale[0];
  return x;
}

bool elementwise_float_op(const std::string& op) {
  const OpSchema* s = find_op_schema(op);
  return s && s->tabulable;
}

std::optional<std::vector<size_t>> unary_region(const Graph& g, const std::vector<bool>& removed,
                                                const std::map<std::string, int>& uses, const std::set<std::string>& outs,
                                                const std::string& v, size_t first) {
  std::set<std::string> inside = {v};
  std::vector<size_t> region;
  std::map<std::string, int> reads;  // uses of each value from inside the region
  auto scalar_const = [&](const std::string& name) {
    auto it = g.initializers.find(name);
    return it != g.initializers.end() && it->second.numel() == 1 && it->second.dtype() == DType::kFloat32;
  };
  for (size_t j = first; j < g.nodes.size() && j < first + 16; ++j) {
    const Node& n = g.nodes[j];
    if (removed[j] || !elementwise_float_op(n.op) || n.outputs.size() != 1) continue;
    bool reads_inside = false, ok = true;
    for (const auto& in : n.inputs) {
      if (in.empty()) continue;
      if (inside.count(in)) reads_inside = true;
      else if (!scalar_const(in)) ok = false;
    }
    if (!ok || !reads_inside) continue;
    region.push_back(j);
    inside.insert(n.outputs[0]);
    for (const auto& in : n.inputs)
      if (inside.count(in)) ++reads[in];
  }
  if (region.size() < 2 || region.front() != first) return std::nullopt;
  // Closed: v and every region value but the last are read only inside; the last is
  // read once, by a QuantizeLinear.
  const std::string& last = g.nodes[region.back()].outputs[0];
  for (const auto& val : inside) {
    if (val == last || outs.count(val)) continue;
    auto u = uses.find(val);
    if (val != v && (u == uses.end() || u->second != reads[val])) return std::nullopt;
  }
  if (outs.count(last) || uses.count(last) == 0 || uses.at(last) != 1) return std::nullopt;
  for (size_t j = region.back() + 1; j < g.nodes.size(); ++j) {
    if (removed[j]) continue;
    const Node& n = g.nodes[j];
    if (std::find(n.inputs.begin(), n.inputs.end(), last) == n.inputs.end()) continue;
    if (n.op != "QuantizeLinear" || n.inputs[0] != last) return std::nullopt;
    region.push_back(j);
    return region;
  }
  return std::nullopt;
}

Tensor region_values(const Graph& g, const std::vector<size_t>& region, const std::string& v, const Tensor& x) {
  std::map<std::string, Tensor> env;
  env.emplace(v, x);
  for (size_t r = 0; r + 1 < region.size(); ++r) {
    const Node& n = g.nodes[region[r]];
    std::vector<Meta> metas;
    std::vector<const Tensor*> consts, ins;
    for (const auto& in : n.inputs) {
      if (in.empty()) {
        metas.push_back({{}, DType::kFloat32});
        consts.push_back(nullptr);
        ins.push_back(nullptr);
        continue;
      }
      auto e = env.find(in);
      const Tensor* t = e != env.end() ? &e->second : &g.initializers.at(in);
      metas.push_back({t->shape(), DType::kFloat32});
      consts.push_back(e != env.end() ? nullptr : t);
      ins.push_back(t);
    }
    Kernel k = make_kernel(n, metas, consts, "reference");
    Tensor y(k.outputs.at(0).shape, DType::kFloat32);
    k.run(ins, {&y});
    env.emplace(n.outputs[0], std::move(y));
  }
  return env.at(g.nodes[region[region.size() - 2]].outputs[0]);
}

}  // namespace qfx::runtime::ir::qdq
