// QDQ rules of the linear ops: Conv -> QLinearConv, Gemm -> QGemm, MatMul ->
// QLinearMatMul (constant 8-bit weights, per tensor or per output channel, an
// int32 or float constant bias, a fused Relu / Clip), and MatMul between two
// quantized activations (attention scores and context).
#include "rules.h"

namespace qfx::runtime::ir::qdq {
namespace {

// MatMul -> Add(constant bias) [-> Relu/Clip] -> Q: a linear on an input of rank
// other than 2 (x @ W^T + b); the Add is absorbed as the bias. Returns the Add's
// node and the bias value, or nothing.
std::optional<std::pair<size_t, std::string>> matmul_add_bias(const Ctx& c, const Node& n, const Tensor& w) {
  auto a = c.only_consumer(n.outputs[0]);
  if (!a || c.g.nodes[*a].op != "Add" || c.g.nodes[*a].inputs.size() != 2) return std::nullopt;
  const Node& an = c.g.nodes[*a];
  const std::string& other = an.inputs[an.inputs[0] == n.outputs[0] ? 1 : 0];
  auto db = c.dq(other);
  const Tensor* bt = db ? c.init(db->quantized) : c.init(other);
  if (!bt || bt->numel() != w.shape()[1] || bt->dtype() != (db ? DType::kInt32 : DType::kFloat32)) return std::nullopt;
  return std::make_pair(*a, db ? db->quantized : other);
}

// A reason the weights (DequantizeLinear `dw` of constant `w`) cannot run in int8,
// or empty.
std::string weight_refusal(const Node& n, const Ctx::DQ& dw, const Tensor& w) {
  if (dw.q.dtype != DType::kInt8 && dw.q.dtype != DType::kUInt8)
    return std::string("weights are ") + dtype_name(dw.q.dtype) + " (8-bit only)";
  if (n.op == "Gemm" && (n.attr_i("transA", 0) != 0 || n.attr_f("alpha", 1) != 1 || n.attr_f("beta", 1) != 1))
    return "Gemm with transA/alpha/beta";
  // Per-channel weights must be quantized along the output channel.
  const int64_t out_axis = n.op == "Conv" ? 0 : (n.op == "Gemm" && n.attr_i("transB", 0) != 0 ? 0 : 1);
  const int64_t axis = dw.q.axis < 0 ? dw.q.axis + static_cast<int64_t>(w.shape().size()) : dw.q.axis;
  if (dw.q.per_channel() && axis != out_axis) return "per-channel weights on an axis other than the output channel";
  return "";
}

// The bias input: an int32 dequantized constant or a float constant ("" when the
// node has none); nullopt when it is computed.
std::optional<std::string> bias_of(const Ctx& c, const Node& n) {
  if (n.inputs.size() <= 2 || n.inputs[2].empty()) return std::string();
  auto db = c.dq(n.inputs[2]);
  if (db && c.init(db->quantized) && c.init(db->quantized)->dtype() == DType::kInt32) return db->quantized;
  if (c.init(n.inputs[2])) return n.inputs[2];
  return std::nullopt;
}

// Why the weights of a group that stays float are not int8 qparams: a block-wise or
// narrow-typed DequantizeLinear (qdq_refusal; of constants it is evaluated once when
// the model is planned), or no dequantized constant at all.
std::string weight_form(const Ctx& c, const Node& n) {
  auto p = n.inputs.size() > 1 ? c.producer.find(n.inputs[1]) : c.producer.end();
  if (p != c.producer.end() && c.g.nodes[p->second].op == "DequantizeLinear")
    if (std::string why = qdq_refusal(c.g.nodes[p->second]); !why.empty()) return "weights are a DequantizeLinear with " + why;
  return "weights are not a dequantized constant";
}

// MatMul of two quantized activations, per-tensor 8-bit qparams on both sides.
bool activation_matmul(Group& g, const Ctx::DQ& dw, const Ctx::Tail& t) {
  if (!eight_bit_per_tensor(dw.q) || g.d0.q.dtype == DType::kInt16 || t.q.dtype == DType::kInt16) return false;
  Node f = g.node();
  f.op = "QLinearMatMul";
  f.inputs = {g.d0.quantized, dw.quantized};
  f.in_q = {g.d0.q, dw.q};
  g.c.replace(g.i, f, t);
  return true;
}

bool linear(Group& g) {
  Ctx& c = g.c;
  const Node& n = g.node();
  auto dw = n.inputs.size() > 1 ? c.dq(n.inputs[1]) : std::nullopt;
  const Tensor* w = dw ? c.init(dw->quantized) : nullptr;
  auto add = n.op == "MatMul" && w && w->shape().size() == 2 ? matmul_add_bias(c, n, *w) : std::nullopt;
  auto t = add ? c.tail(add->first, true) : c.tail(g.i, n.op != "MatMul");
  if (t && add) t->absorbed.push_back(add->first);
  if (n.op == "MatMul" && dw && !w && t && activation_matmul(g, *dw, *t)) return true;
  auto refuse = [&](const std::string& why) {
    g.report.push_back(n.label() + ": " + why + "; runs in float");
    return false;
  };
  if (!dw || !w || !t) return t ? refuse(weight_form(c, n)) : false;
  if (std::string why = weight_refusal(n, *dw, *w); !why.empty()) return refuse(why);
  auto bias = bias_of(c, n);
  if (!bias) return refuse("bias is not constant");
  if (add) bias = add->second;
  Node f = n;
  f.op = g.form;
  f.inputs = {g.d0.quantized, dw->quantized};
  if (!bias->empty()) f.inputs.push_back(*bias);
  f.in_q = {g.d0.q, dw->q};
  c.replace(g.i, f, *t);
  return true;
}

}  // namespace

void register_linear_qdq_rules() {
  for (const char* op : {"Conv", "Gemm", "MatMul"}) register_qdq_rule(op, linear);
}

}  // namespace qfx::runtime::ir::qdq
