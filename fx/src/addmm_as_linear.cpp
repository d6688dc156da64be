// aten::addmm / aten::mm with a parameter as aten::linear (see decompositions.h).
#include <ATen/ATen.h>

#include "qfx/fx/decompositions.h"

namespace qfx::fx {
namespace {

bool is_one(const Node& n, const char* name, size_t i) {
  const Argument* a = i < n.args().size() ? &n.args()[i] : nullptr;
  for (const auto& kv : n.kwargs())
    if (kv.first == name) a = &kv.second;
  if (!a || (a->is_const() && a->value.isNone())) return true;
  return a->is_const() && (a->value.isInt() || a->value.isDouble()) && a->value.toDouble() == 1.0;
}

// A get_attr of a float tensor of rank `rank`.
bool is_param(const GraphModule& gm, const Argument& a, int64_t rank = 2) {
  if (!a.is_node() || a.node->op() != Opcode::kGetAttr || !gm.has_attr(a.node->target())) return false;
  const at::Tensor t = gm.get_attr(a.node->target());
  return t.dim() == rank && t.is_floating_point();
}

// The [out, in] weight node of `m2` ([in, out]): W of permute(W, [1, 0]) / t(W), or a
// transposed copy of the parameter m2 registered beside it (path + "_t").
Node* weight_of(GraphModule& gm, Node* user, const Argument& m2) {
  if (!m2.is_node()) return nullptr;
  Node* m = m2.node;
  const std::string& t = m->target();
  const bool swap = (t == "aten::t" && m->args().size() == 1) ||
                    (t == "aten::permute" && m->args().size() == 2 && m->args()[1].is_const() &&
                     m->args()[1].value.isIntList() && m->args()[1].value.toIntVector() == std::vector<int64_t>{1, 0});
  if (m->op() == Opcode::kCallFunction && swap && is_param(gm, m->args()[0])) return m->args()[0].node;
  if (!is_param(gm, m2)) return nullptr;
  const std::string path = m->target() + "_t";
  if (!gm.has_attr(path)) {
    at::Tensor w = gm.get_attr(m->target()).detach().t().contiguous();
    w.set_requires_grad(gm.get_attr(m->target()).requires_grad());
    gm.add_tensor(path, w, /*is_buffer=*/false);
  }
  auto guard = gm.graph().inserting_before(user);
  Node* g = gm.graph().get_attr(path, m->name() + "_t");
  g->meta() = m->meta();
  return g;
}

// The value under view / expand nodes (Core ATen's matmul of a 3-D input by a
// weight: bmm of view(expand(x)) by view(expand(permute(W)))); `a` itself when none.
const Argument& under_expand(const Argument& a) {
  if (!a.is_node() || a.node->op() != Opcode::kCallFunction) return a;
  const std::string& t = a.node->target();
  if ((t == "aten::view" || t == "aten::expand" || t == "aten::_unsafe_view") && !a.node->args().empty())
    return under_expand(a.node->args()[0]);
  return a;
}

// bmm(x, B) where B is a 2-D parameter's transpose expanded over the batch: the
// [out, in] weight, else null.
Node* batched_weight(GraphModule& gm, Node* bmm) {
  const Argument& b = under_expand(bmm->args()[1]);
  if (!b.is_node() || b.node == bmm->args()[1].node) return nullptr;
  const std::string& t = b.node->target();
  const bool swap = (t == "aten::t" && b.node->args().size() == 1) ||
                    (t == "aten::permute" && b.node->args().size() == 2 && b.node->args()[1].is_const() &&
                     b.node->args()[1].value.isIntList() && b.node->args()[1].value.toIntVector() == std::vector<int64_t>{1, 0});
  return b.node->op() == Opcode::kCallFunction && swap && is_param(gm, b.node->args()[0]) ? b.node->args()[0].node : nullptr;
}

}  // namespace

int addmm_as_linear(GraphModule& gm) {
  int count = 0;
  for (Node* n : gm.graph().nodes()) {
    if (n->op() != Opcode::kCallFunction) continue;
    const std::string& t = n->target();
    if (t == "aten::bmm" && n->args().size() == 2) {  // x [B, M, K] @ W^T expanded: linear(x, W)
      Node* w = batched_weight(gm, n);
      if (!w) continue;
      auto guard = gm.graph().inserting_before(n);
      Node* lin = gm.graph().call_function("aten::linear", {n->args()[0], Argument(w)}, {}, n->name() + "_linear");
      lin->meta() = n->meta();
      n->replace_all_uses_with(lin);
      gm.graph().erase_node(n);
      ++count;
      continue;
    }
    const bool addmm = t == "aten::addmm", mm = t == "aten::mm";
    if (!(addmm && n->args().size() >= 3 && is_one(*n, "beta", 3) && is_one(*n, "alpha", 4)) && !(mm && n->args().size() == 2))
      continue;
    const Argument& x = n->args()[addmm ? 1 : 0];
    const Argument& m2 = n->args()[addmm ? 2 : 1];
    if (addmm && !is_param(gm, n->args()[0], 1)) continue;  // the bias: a 1-D parameter
    Node* w = weight_of(gm, n, m2);
    if (!w) continue;
    auto guard = gm.graph().inserting_before(n);
    std::vector<Argument> args = {x, Argument(w)};
    if (addmm) args.push_back(n->args()[0]);
    Node* lin = gm.graph().call_function("aten::linear", std::move(args), {}, n->name() + "_linear");
    lin->meta() = n->meta();
    n->replace_all_uses_with(lin);
    gm.graph().erase_node(n);
    ++count;
  }
  return count;
}

}  // namespace qfx::fx
