// The integer-only groups of a target's `arithmetic.integer_only`: a DequantizeLinear
// -> GELU / Softmax / layer normalisation -> QuantizeLinear group becomes one
// QIntGelu / QIntSoftmax / QIntLayerNorm node (qfx/runtime/integer_only.h).
#include <algorithm>
#include <cmath>

#include "qdq_match.h"
#include "qfx/error.h"

namespace qfx::runtime::ir::qdq {
namespace {

bool eight_bit(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

bool wants(const Graph& g, const char* op) {
  const auto& w = g.arithmetic.integer_only;
  return std::find(w.begin(), w.end(), op) != w.end();
}

// The tail's QuantizeLinear, when it is an 8-bit per-tensor one.
std::optional<Ctx::Tail> eight_bit_tail(const Ctx& c, size_t node) {
  auto t = c.tail(node, false);
  if (!t || !eight_bit(t->q.dtype)) return std::nullopt;
  return t;
}

Node fused(const Node& n, const char* op, const Ctx::DQ& d0) {
  Node f = n;
  f.op = op;
  f.inputs = {d0.quantized};
  f.in_q = {d0.q};
  f.attrs.clear();
  return f;
}

// A region on one 8-bit value is GELU (erf form) when it computes it at every one of
// the value's 256 codes: the tanh approximation (within 5e-4) counts too.
bool region_is_gelu(const Graph& g, const std::vector<size_t>& region, const std::string& v, const QInfo& xq) {
  const Tensor x = dequantized_codes(xq);
  Tensor y = region_values(g, region, v, x);
  if (y.numel() != 256) return false;
  for (int k = 0; k < 256; ++k) {
    const double xv = x.data<float>()[k], want = 0.5 * xv * (1.0 + std::erf(xv / std::sqrt(2.0)));
    if (std::fabs(y.data<float>()[k] - want) > 1e-3 * std::max(1.0, std::fabs(xv))) return false;
  }
  return true;
}

bool gelu(Ctx& c, size_t i, const Ctx::DQ& d0) {
  const Node& n = c.g.nodes[i];
  if (!elementwise_float_op(n.op)) return false;
  auto reg = unary_region(c.g, c.removed, c.uses, c.graph_outputs, n.inputs[0], i);
  if (!reg) return false;
  const Node& qn = c.g.nodes[reg->back()];
  auto yq = c.qparams(qn, DType::kUInt8);
  if (!yq || yq->per_channel() || !eight_bit(yq->dtype)) return false;
  try {
    if (!region_is_gelu(c.g, *reg, n.inputs[0], d0.q)) return false;
  } catch (const Error&) {  // an op the reference cannot run on these shapes: not ours
    return false;
  }
  Node f = fused(n, "QIntGelu", d0);
  f.name = n.name + "_gelu";
  c.replace_region(i, f, *reg, *yq);
  return true;
}

bool softmax(Ctx& c, size_t i, const Ctx::DQ& d0) {
  const Node& n = c.g.nodes[i];
  auto t = eight_bit_tail(c, i);
  if (!t) return false;
  Node f = fused(n, "QIntSoftmax", d0);
  f.attrs["axis"] = int_attr(n.attr_i("axis", -1));
  c.replace(i, f, *t);
  return true;
}

// The single consumer of `value` with op `op` (nullopt otherwise).
std::optional<size_t> next(const Ctx& c, const std::string& value, const char* op) {
  auto k = c.only_consumer(value);
  if (!k || c.g.nodes[*k].op != op) return std::nullopt;
  return k;
}

// The other input of two-input node `k` besides `value`, when it is a float32 initializer.
const Tensor* const_operand(const Ctx& c, size_t k, const std::string& value, std::string* name) {
  const Node& m = c.g.nodes[k];
  if (m.inputs.size() != 2) return nullptr;
  *name = m.inputs[0] == value ? m.inputs[1] : m.inputs[0];
  const Tensor* t = c.init(*name);
  return t && t->dtype() == DType::kFloat32 ? t : nullptr;
}

// Trailing axes [-d, -1] as a ReduceMean's `axes` (negative, contiguous): d, or 0.
int64_t trailing_axes(const Node& n) {
  auto it = n.attrs.find("axes");
  if (it == n.attrs.end() || it->second.ints.empty() || n.attr_i("keepdims", 1) != 1) return 0;
  std::vector<int64_t> a = it->second.ints;
  std::sort(a.begin(), a.end());
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k] != -static_cast<int64_t>(a.size()) + static_cast<int64_t>(k)) return 0;
  return static_cast<int64_t>(a.size());
}

// ReduceMean(x) -> Sub(x, mean) -> Mul(d, d) -> ReduceMean -> Add(eps) -> Sqrt ->
// Div(d, std) [-> Mul(weight)] [-> Add(bias)] -> QuantizeLinear: the opset-14 form.
bool layer_norm_decomposed(Ctx& c, size_t i, const Ctx::DQ& d0) {
  const Graph& g = c.g;
  const Node& n0 = g.nodes[i];
  const int64_t dims = trailing_axes(n0);
  const std::string& x = n0.inputs[0];
  auto sub = c.only_consumer(n0.outputs[0]);
  if (!dims || !sub || g.nodes[*sub].op != "Sub" || g.nodes[*sub].inputs.size() != 2 || g.nodes[*sub].inputs[0] != x)
    return false;
  const std::string& d = g.nodes[*sub].outputs[0];
  if (c.graph_outputs.count(d) || c.uses.count(d) == 0 || c.uses.at(d) != 3) return false;
  std::optional<size_t> sq, div;
  for (size_t k = *sub + 1; k < g.nodes.size(); ++k) {
    if (c.removed[k]) continue;
    const Node& m = g.nodes[k];
    if (m.op == "Mul" && m.inputs.size() == 2 && m.inputs[0] == d && m.inputs[1] == d) sq = k;
    else if (m.op == "Div" && m.inputs.size() == 2 && m.inputs[0] == d) div = k;
  }
  if (!sq || !div) return false;
  auto var = next(c, g.nodes[*sq].outputs[0], "ReduceMean");
  if (!var || trailing_axes(g.nodes[*var]) != dims) return false;
  auto add = next(c, g.nodes[*var].outputs[0], "Add");
  std::string eps_name;
  const Tensor* eps = add ? const_operand(c, *add, g.nodes[*var].outputs[0], &eps_name) : nullptr;
  if (!eps || eps->numel() != 1) return false;
  auto sqrt = next(c, g.nodes[*add].outputs[0], "Sqrt");
  if (!sqrt || c.only_consumer(g.nodes[*sqrt].outputs[0]) != div || g.nodes[*div].inputs[1] != g.nodes[*sqrt].outputs[0])
    return false;
  std::vector<size_t> absorbed = {*sub, *sq, *var, *add, *sqrt, *div};
  std::string weight, bias, last = g.nodes[*div].outputs[0];
  if (auto mul = next(c, last, "Mul"); mul && const_operand(c, *mul, last, &weight)) {
    absorbed.push_back(*mul);
    last = g.nodes[*mul].outputs[0];
  } else {
    weight.clear();
  }
  if (auto b = next(c, last, "Add"); b && const_operand(c, *b, last, &bias)) {
    absorbed.push_back(*b);
    last = g.nodes[*b].outputs[0];
  } else {
    bias.clear();
  }
  auto t = eight_bit_tail(c, absorbed.back());
  if (!t) return false;
  Node f = fused(n0, "QIntLayerNorm", d0);
  f.inputs = {d0.quantized, weight, bias};
  f.attrs["axis"] = int_attr(-dims);
  f.attrs["epsilon"] = float_attr(eps->data<float>()[0]);
  c.release_inputs(absorbed);
  t->absorbed.insert(t->absorbed.begin(), absorbed.begin(), absorbed.end());
  c.replace(i, f, *t);
  return true;
}

bool layer_norm_node(Ctx& c, size_t i, const Ctx::DQ& d0) {
  const Node& n = c.g.nodes[i];
  const int64_t axis = n.attr_i("axis", -1);
  std::string weight = n.inputs.size() > 1 ? n.inputs[1] : "", bias = n.inputs.size() > 2 ? n.inputs[2] : "";
  for (const auto* name : {&weight, &bias})
    if (!name->empty() && (!c.init(*name) || c.init(*name)->dtype() != DType::kFloat32)) return false;
  auto t = axis < 0 ? eight_bit_tail(c, i) : std::nullopt;
  if (!t) return false;
  Node f = fused(n, "QIntLayerNorm", d0);
  f.inputs = {d0.quantized, weight, bias};
  f.attrs["axis"] = int_attr(axis);
  f.attrs["epsilon"] = float_attr(n.attr_f("epsilon", 1e-5f));
  c.replace(i, f, *t);
  return true;
}

}  // namespace

bool fuse_integer_only(Ctx& c, size_t i, const Ctx::DQ& d0) {
  // Below 1e-6 the kernels' int64 intermediates would overflow: such a group stays as it is.
  if (c.g.arithmetic.integer_only.empty() || d0.q.per_channel() || !eight_bit(d0.q.dtype) || d0.q.scale[0] < 1e-6f)
    return false;
  const std::string& op = c.g.nodes[i].op;
  if (op == "Softmax") return wants(c.g, "Softmax") && softmax(c, i, d0);
  if (op == "LayerNormalization") return wants(c.g, "LayerNormalization") && layer_norm_node(c, i, d0);
  if (op == "ReduceMean") return wants(c.g, "LayerNormalization") && layer_norm_decomposed(c, i, d0);
  return wants(c.g, "Gelu") && gelu(c, i, d0);
}

}  // namespace qfx::runtime::ir::qdq
