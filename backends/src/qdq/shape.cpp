// QDQ rules of the shape ops: Concat -> QLinearConcat, each input with its own
// per-tensor 8-bit qparams (the other shape ops move codes: rules.h).
#include "rules.h"

namespace qfx::runtime::ir::qdq {
namespace {

bool concat(Group& g) {
  const Node& n = g.node();
  std::vector<std::string> ins;
  std::vector<QInfo> qs;
  for (const auto& in : n.inputs) {
    auto d = g.c.dq(in);
    if (!d || d->q.per_channel() || d->q.dtype == DType::kInt16) return false;
    ins.push_back(d->quantized);
    qs.push_back(d->q);
  }
  auto t = g.c.tail(g.i, false);
  if (!t) return false;
  Node f = n;
  f.op = g.form;
  f.inputs = ins;
  f.in_q = qs;
  g.c.replace(g.i, f, *t);
  return true;
}

}  // namespace

void register_shape_qdq_rules() { register_qdq_rule("Concat", concat); }

}  // namespace qfx::runtime::ir::qdq
