// The QDQ rule registry (rules.h) and the rules every family shares.
#include "rules.h"

#include <map>
#include <mutex>

#include "qfx/runtime/op_schema.h"

namespace qfx::runtime::ir::qdq {
namespace {

struct Rules {
  std::mutex mu;
  std::map<std::string, QdqRule> by_op;
};

Rules& rules() {
  static Rules r;
  return r;
}

void register_builtins() {
  register_linear_qdq_rules();
  register_elementwise_qdq_rules();
  register_pooling_qdq_rules();
  register_shape_qdq_rules();
}

bool same_q(const QInfo& a, const QInfo& b) { return a.scale == b.scale && a.zero_point == b.zero_point && a.dtype == b.dtype; }

}  // namespace

void register_qdq_rule(const std::string& op, QdqRule rule) {
  Rules& r = rules();
  std::lock_guard<std::mutex> lk(r.mu);
  r.by_op[op] = std::move(rule);
}

const QdqRule* find_qdq_rule(const std::string& op) {
  static std::once_flag once;
  std::call_once(once, register_builtins);
  static const QdqRule same = same_qparams_rule;
  Rules& r = rules();
  {
    std::lock_guard<std::mutex> lk(r.mu);
    auto it = r.by_op.find(op);
    if (it != r.by_op.end()) return &it->second;  // entries are never erased
  }
  const OpSchema* s = find_op_schema(op);
  return s && s->qdq_form == op ? &same : nullptr;
}

bool unary_form(Group& g) {
  auto t = g.c.tail(g.i, false);
  if (!t) return false;
  Node f = g.node();
  f.op = g.form;
  f.inputs[0] = g.d0.quantized;
  f.in_q = {g.d0.q};
  g.c.replace(g.i, f, *t);
  return true;
}

bool same_qparams_rule(Group& g) {
  auto t = g.c.tail(g.i, false);
  if (!t) return false;
  if (!same_q(g.d0.q, t->q)) {
    g.report.push_back(g.node().label() + ": input and output qparams differ; runs in float");
    return false;
  }
  Node f = g.node();
  f.inputs[0] = g.d0.quantized;
  f.in_q = {g.d0.q};
  g.c.replace(g.i, f, *t);
  return true;
}

}  // namespace qfx::runtime::ir::qdq
