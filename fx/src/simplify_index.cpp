// aten::index.Tensor by full aranges as unsqueezes of the indexed tensor (see
// decompositions.h).
#include <optional>
#include <string>
#include <vector>

#include "qfx/fx/decompositions.h"

namespace qfx::fx {
namespace {

// meta["traced_dims"] of a node: each size as the program wrote it; empty if unknown.
std::vector<std::string> dims(const Node* n) {
  auto it = n->meta().find("traced_dims");
  if (it == n->meta().end() || !it->second.isList()) return {};
  std::vector<std::string> out;
  for (const auto& d : it->second.toListRef()) out.push_back(d.isString() ? d.toStringRef() : "?");
  return out;
}

// The size a scalar argument names: an int constant or a symbol's expression.
std::optional<std::string> size_text(const Argument& a) {
  if (a.is_const() && a.value.isInt()) return std::to_string(a.value.toInt());
  if (!a.is_node()) return std::nullopt;
  auto it = a.node->meta().find("sym_expr");
  if (it == a.node->meta().end() || !it->second.isString()) return std::nullopt;
  return it->second.toStringRef();
}

bool is_int(const Argument* a, int64_t v) { return a && a->is_const() && a->value.isInt() && a->value.toInt() == v; }

// The end of an `arange(0, end, 1)` that `i` is (through unsqueeze and add of 0).
std::optional<std::string> arange_end(const Node* i) {
  for (;;) {
    const std::string& t = i->target();
    if (i->op() != Opcode::kCallFunction || i->args().empty()) return std::nullopt;
    const Argument& in = i->args()[0];
    if ((t == "aten::unsqueeze" || (t == "aten::add.Tensor" && i->args().size() >= 2 && is_int(&i->args()[1], 0))) && in.is_node()) {
      i = in.node;
      continue;
    }
    const auto& a = i->args();
    if (t == "aten::arange") return size_text(a[0]);
    if (t == "aten::arange.start" && a.size() >= 2 && is_int(&a[0], 0)) return size_text(a[1]);
    if (t == "aten::arange.start_step" && a.size() >= 3 && is_int(&a[0], 0) && is_int(&a[2], 1)) return size_text(a[1]);
    return std::nullopt;
  }
}

// The broadcast axes a_d of n's indices, or nullopt when n is not a full-arange index.
std::optional<std::vector<size_t>> arange_axes(const Node* n) {
  if (n->args().size() != 2 || !n->args()[0].is_node() || n->args()[1].kind != Argument::Kind::kList) return std::nullopt;
  const auto x = dims(n->args()[0].node);
  const auto& idx = n->args()[1].items;
  if (idx.empty() || idx.size() > x.size()) return std::nullopt;
  std::vector<size_t> axes;
  size_t rank = 0;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (!idx[d].is_node()) return std::nullopt;  // None: a sliced dimension
    const auto id = dims(idx[d].node);
    const auto end = arange_end(idx[d].node);
    if (id.empty() || !end || *end != x[d] || (d && id.size() != rank)) return std::nullopt;
    rank = id.size();
    std::optional<size_t> axis;
    for (size_t j = 0; j < id.size(); ++j) {
      if (id[j] == "1" && x[d] != "1") continue;
      if (id[j] != x[d] || axis) return std::nullopt;
      axis = j;
    }
    if (!axis || (!axes.empty() && *axis <= axes.back())) return std::nullopt;
    axes.push_back(*axis);
  }
  return axes;
}

void rewrite(Graph& g, Node* n, const std::vector<size_t>& axes, size_t rank) {
  auto guard = g.inserting_before(n);
  Node* y = n->args()[0].node;
  for (size_t j = 0, k = 0; j < rank; ++j) {
    if (k < axes.size() && axes[k] == j) {
      ++k;
      continue;
    }
    y = g.call_function("aten::unsqueeze", {Argument(y), Argument(c10::IValue(static_cast<int64_t>(j)))}, {},
                        n->name() + "_unsqueeze" + std::to_string(j));
    y->meta()["is_tensor"] = true;
    for (const char* key : {"module_path", "traced_dtype"}) {
      auto it = n->meta().find(key);
      if (it != n->meta().end()) y->meta()[key] = it->second;
    }
  }
  for (const char* key : {"traced_shape", "traced_dims", "shape", "type"}) {
    auto it = n->meta().find(key);
    if (it != n->meta().end() && y != n->args()[0].node) y->meta()[key] = it->second;
  }
  n->replace_all_uses_with(y);
  g.erase_node(n);
}

}  // namespace

int simplify_arange_index(GraphModule& gm) {
  int count = 0;
  Graph& g = gm.graph();
  for (Node* n : g.nodes()) {
    if (n->op() != Opcode::kCallFunction || n->target() != "aten::index.Tensor") continue;
    const auto axes = arange_axes(n);
    if (!axes) continue;
    rewrite(g, n, *axes, dims(n->args()[1].items[0].node).size());
    ++count;
  }
  return count;
}

}  // namespace qfx::fx
