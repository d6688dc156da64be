// Additive attention masks as masked_fill (see decompositions.h).
#include <ATen/ATen.h>

#include <limits>
#include <optional>

#include "qfx/fx/decompositions.h"

namespace qfx::fx {
namespace {

// The number `a` is: a constant, or aten::scalar_tensor / aten::full of one (0-d).
std::optional<double> scalar_of(const Argument& a) {
  if (a.is_const() && (a.value.isDouble() || a.value.isInt())) return a.value.toDouble();
  if (!a.is_node() || a.node->op() != Opcode::kCallFunction) return std::nullopt;
  const std::string& t = a.node->target();
  const auto& args = a.node->args();
  if (t.rfind("aten::scalar_tensor", 0) == 0 && !args.empty()) return scalar_of(args[0]);
  if (t.rfind("aten::full", 0) == 0 && args.size() > 1 && args[0].is_const() && args[0].value.isIntList() &&
      args[0].value.toIntVector().empty())
    return scalar_of(args[1]);
  return std::nullopt;
}

// A fill that masks a position out of a softmax: -inf, or a float32 lowest-like value.
bool masks_out(double v) { return v == -std::numeric_limits<double>::infinity() || v <= -1e30; }

}  // namespace

int mask_add_as_masked_fill(GraphModule& gm) {
  int count = 0;
  for (Node* n : gm.graph().nodes()) {
    if (n->op() != Opcode::kCallFunction || n->target() != "aten::add.Tensor" || n->args().size() != 2 || !n->kwargs().empty())
      continue;
    for (size_t side : {size_t{1}, size_t{0}}) {
      const Argument& m = n->args()[side];
      if (!m.is_node() || m.node->target() != "aten::where.self" || m.node->args().size() != 3 || m.node->users().size() != 1) continue;
      const std::optional<double> a = scalar_of(m.node->args()[1]), b = scalar_of(m.node->args()[2]);
      if (!a || !b) continue;
      const bool fill_when_true = masks_out(*a) && *b == 0.0, fill_when_false = masks_out(*b) && *a == 0.0;
      if (!fill_when_true && !fill_when_false) continue;
      auto guard = gm.graph().inserting_before(n);
      Argument cond = m.node->args()[0];
      if (fill_when_false) {
        Node* inv = gm.graph().call_function("aten::logical_not", {cond}, {}, n->name() + "_keep");
        inv->meta()["traced_dtype"] = std::string("Bool");
        cond = Argument(inv);
      }
      Node* f = gm.graph().call_function("aten::masked_fill.Scalar", {n->args()[1 - side], cond,
                                                                      Argument(c10::IValue(fill_when_true ? *a : *b))},
                                         {}, n->name() + "_masked");
      f->meta() = n->meta();
      n->replace_all_uses_with(f);
      gm.graph().erase_node(n);
      ++count;
      break;
    }
  }
  return count;
}

}  // namespace qfx::fx
