// QDQ rules of the elementwise ops: Add -> QLinearAdd (a Relu / Clip after it
// fused), Mul -> QLinearMul, Relu -> QRelu, Clip -> QClip (constant bounds).
#include "rules.h"

namespace qfx::runtime::ir::qdq {
namespace {

// Two quantized inputs, per tensor, 8-bit.
bool binary(Group& g) {
  const Node& n = g.node();
  auto d1 = n.inputs.size() > 1 ? g.c.dq(n.inputs[1]) : std::nullopt;
  auto t = g.c.tail(g.i, n.op == "Add");
  if (!d1 || !t || d1->q.per_channel() || d1->q.dtype == DType::kInt16) return false;
  Node f = n;
  f.op = g.form;
  f.inputs = {g.d0.quantized, d1->quantized};
  f.in_q = {g.d0.q, d1->q};
  g.c.replace(g.i, f, *t);
  return true;
}

// Relu / Clip on the codes: the activation is the form's fused clamp.
bool activation(Group& g) {
  const Node& n = g.node();
  auto t = g.c.tail(g.i, false);
  if (!t) return false;
  Ctx::Tail tt = *t;
  tt.act = n.op;
  // A bound computed at run time (not a scalar float constant): stays float.
  if (n.op == "Clip" && !clip_bounds(g.c.g, n, &tt.lo, &tt.hi)) return false;
  Node f = n;
  f.op = g.form;
  f.inputs = {g.d0.quantized};
  f.in_q = {g.d0.q};
  g.c.replace(g.i, f, tt);
  return true;
}

}  // namespace

void register_elementwise_qdq_rules() {
  for (const char* op : {"Add", "Mul"}) register_qdq_rule(op, binary);
  for (const char* op : {"Relu", "Clip"}) register_qdq_rule(op, activation);
}

}  // namespace qfx::runtime::ir::qdq
