// QDQ matching: DequantizeLinear -> op -> QuantizeLinear groups become int8 ops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "kernels.h"
#include "qdq/rules.h"
#include "qdq_match.h"
#include "qfx/error.h"
#include "qfx/runtime/op_schema.h"

namespace qfx::runtime::ir {
namespace {

using qdq::Ctx;

// A QLut's "table" attribute: the 256 values `f` quantized with `yq`.
Attr quantized_table(const Tensor& f, const QInfo& yq) {
  if (f.numel() != 256) throw DataError("a table's function gives " + std::to_string(f.numel()) + " values, not 256");
  const int32_t qlo = yq.dtype == DType::kInt8 ? -128 : 0, qhi = yq.dtype == DType::kInt8 ? 127 : 255;
  Attr a;
  a.kind = Attr::Kind::kInts;
  for (int i = 0; i < 256; ++i) a.ints.push_back(quantize_value(f.data<float>()[i], yq.scale[0], yq.zero_point[0], qlo, qhi));
  return a;
}

// table[q - lowest code] = Q(f(DQ(q))) for the 256 codes of `xq`, f the float
// reference kernel of `n`: exactly what the unfused DQ -> op -> Q group computes.
Attr lut_table(const Node& n, const QInfo& xq, const QInfo& yq) {
  Node f = n;
  f.inputs.resize(1);
  Kernel k = make_kernel(f, {{{256}, DType::kFloat32}}, {nullptr}, "reference");
  const Tensor x = qdq::dequantized_codes(xq);
  Tensor y({256}, DType::kFloat32);
  k.run({&x}, {&y});
  return quantized_table(y, yq);
}

// table[q - lowest code] = Q(f(DQ(q))) for the region's function f, run node by node
// with the reference float kernels on the 256 dequantized codes.
Attr region_table(const Graph& g, const std::vector<size_t>& region, const std::string& v, const QInfo& xq, const QInfo& yq) {
  return quantized_table(qdq::region_values(g, region, v, qdq::dequantized_codes(xq)), yq);
}

// A QLut's "function" attribute: the op types the table replaces, in order
// ("Sigmoid", "Sigmoid -> Mul"), so writers of other formats know what it computes.
Attr function_attr(const Graph& g, const std::vector<size_t>& region) {
  std::string s;
  for (size_t k = 0; k + 1 < region.size(); ++k) s += (s.empty() ? "" : " -> ") + g.nodes[region[k]].op;
  return string_attr(s);
}

}  // namespace

std::optional<QInfo> read_qparams(const Tensor& scale, const Tensor* zero_point, DType fallback, int64_t axis,
                                  std::string* why) {
  if (scale.dtype() != DType::kFloat32 || scale.numel() < 1) {
    *why = "scale is " + scale.describe() + ", expected float32 with at least one element";
    return std::nullopt;
  }
  QInfo q;
  q.scale.assign(scale.data<float>(), scale.data<float>() + scale.numel());
  q.dtype = fallback;
  q.axis = axis;
  if (!zero_point) {
    q.zero_point.assign(q.scale.size(), 0);
    return q;
  }
  const Tensor& z = *zero_point;
  if (z.dtype() != DType::kUInt8 && z.dtype() != DType::kInt8 && z.dtype() != DType::kInt16 && z.dtype() != DType::kInt32) {
    *why = std::string("zero_point is ") + dtype_name(z.dtype()) + ", expected uint8, int8, int16 or int32";
    return std::nullopt;
  }
  if (z.numel() != scale.numel()) {
    *why = std::to_string(z.numel()) + " zero points for " + std::to_string(scale.numel()) + " scales";
    return std::nullopt;
  }
  q.dtype = z.dtype();
  for (int64_t i = 0; i < z.numel(); ++i)
    q.zero_point.push_back(z.dtype() == DType::kUInt8   ? z.data<uint8_t>()[i]
                           : z.dtype() == DType::kInt8  ? z.data<int8_t>()[i]
                           : z.dtype() == DType::kInt16 ? z.data<int16_t>()[i]
                                                        : z.data<int32_t>()[i]);
  return q;
}

namespace {

// A chain of elementwise float ops on one 8-bit value (SiLU as x * Sigmoid(x)):
// one table, where the target has tables at all.
bool region_rule(Ctx& c, size_t i, const Ctx::DQ& d0) {
  const Graph& g = c.g;
  const Node& n = g.nodes[i];
  auto reg = qdq::unary_region(g, c.removed, c.uses, c.graph_outputs, n.inputs[0], i);
  if (!reg) return false;
  auto yq = c.qparams(g.nodes[reg->back()], DType::kUInt8);
  if (!yq || !qdq::eight_bit_per_tensor(*yq)) return false;
  Attr table;
  try {
    table = region_table(g, *reg, n.inputs[0], d0.q, *yq);
  } catch (const Error&) {  // an op the reference cannot run on these shapes: stays float
    return false;
  }
  Node f = n;
  f.op = "QLut";
  f.name = n.name + "_table";
  f.inputs = {d0.quantized};
  f.in_q = {d0.q};
  f.attrs.clear();
  f.attrs["table"] = table;
  f.attrs["function"] = function_attr(g, *reg);
  c.replace_region(i, f, *reg, *yq);
  return true;
}

// One op with a table form (OpSchema::table) between DQ and Q: a QLut.
bool table_rule(Ctx& c, size_t i, const Ctx::DQ& d0) {
  if (d0.q.per_channel() || d0.q.dtype == DType::kInt32 || d0.q.dtype == DType::kInt16) return false;
  auto t = c.tail(i, false);
  if (!t || t->q.dtype == DType::kInt16) return false;
  const Node& n = c.g.nodes[i];
  Node f = n;
  f.op = "QLut";
  f.inputs = {d0.quantized};
  f.in_q = {d0.q};
  f.out_q = t->q;
  f.attrs["table"] = lut_table(n, d0.q, t->q);
  f.attrs["function"] = string_attr(n.op);
  c.replace(i, f, *t);
  return true;
}

// The tables a graph's arithmetic runs: under ONNX's arithmetic every op with a
// table form (the table equals the float group it replaces), else the ops the
// target's `arithmetic.lut` names.
bool tables(Ctx& c, size_t i, const Ctx::DQ& d0, const std::vector<std::string>& lut_ops) {
  if (lut_ops.empty()) return false;
  if (qdq::eight_bit_per_tensor(d0.q) && region_rule(c, i, d0)) return true;
  const std::string& op = c.g.nodes[i].op;
  return std::find(lut_ops.begin(), lut_ops.end(), op) != lut_ops.end() && table_rule(c, i, d0);
}

// The op's integer form through its rule (qdq/rules.h), after the checks every
// form shares. Returns true if the group was replaced.
bool form_rule(Ctx& c, size_t i, const Ctx::DQ& d0, std::vector<std::string>& report) {
  const Node& n = c.g.nodes[i];
  const OpSchema* s = find_op_schema(n.op);
  const qdq::QdqRule* rule = s && !s->qdq_form.empty() ? qdq::find_qdq_rule(n.op) : nullptr;
  if (!rule) {
    if (c.tail(i, false)) report.push_back(n.label() + ": no int8 kernel for this op; runs in float between DQ and Q");
    return false;
  }
  if (d0.q.per_channel() || d0.q.dtype == DType::kInt32) {
    report.push_back(n.label() + ": per-channel or int32 activation qparams; runs in float");
    return false;
  }
  // int16 activations: the forms that take them (16x8 conv / gemm / matmul); other
  // ops run in float between DQ and Q (exact for max pooling and shape ops).
  const OpSchema* form = find_op_schema(s->qdq_form);
  if (!(form && form->wide_input) && (d0.q.dtype == DType::kInt16 || c.wide_tail(i))) {
    report.push_back(n.label() + ": int16 activations; no int16 kernel for this op, runs in float between DQ and Q");
    return false;
  }
  qdq::Group g{c, i, d0, s->qdq_form, report};
  return (*rule)(g);
}

// Drops what no one reads any more (dequantized weights, absorbed Q nodes).
void drop_unread(Ctx& c) {
  Graph& g = c.g;
  for (bool changed = true; changed;) {
    changed = false;
    std::map<std::string, int> uses;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (!c.removed[i])
        for (const auto& in : g.nodes[i].inputs) ++uses[in];
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (c.removed[i]) continue;
      bool used = false;
      for (const auto& o : g.nodes[i].outputs) used |= uses.count(o) || c.graph_outputs.count(o);
      if (!used) c.removed[i] = changed = true;
    }
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!c.removed[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

}  // namespace

std::vector<std::string> fuse_qdq(Graph& g) {
  qdq::sink_dequantize(g);
  Ctx c(g);
  std::vector<std::string> report;
  const std::vector<std::string> float_luts = lut_op_types();  // the ops with a table form (op schemas)
  const std::vector<std::string>& lut_ops = g.arithmetic.is_float() ? float_luts : g.arithmetic.lut;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (c.removed[i] || g.nodes[i].inputs.empty()) continue;
    auto d0 = c.dq(g.nodes[i].inputs[0]);
    if (!d0) continue;  // not fed by a dequantize: a float op
    if (qdq::fuse_integer_only(c, i, *d0) || qdq::fuse_softmax(c, i, *d0) || tables(c, i, *d0, lut_ops)) continue;
    form_rule(c, i, *d0, report);
  }
  drop_unread(c);
  return report;
}

}  // namespace qfx::runtime::ir
