// export_onnx's constant folding (see exporter.h): an aten op that reads only
// parameters, buffers and other such ops (Swin's relative position bias: a table
// indexed by a buffer, reshaped and permuted) is evaluated once at export, as
// torch.fx's const_fold does, and stored as an initializer, when qfx has no ONNX
// export for the op itself.
#include <set>

#include "exporter.h"
#include "qfx/fx/shape_prop.h"

namespace qfx::quant::detail {

bool Exporter::constant_node(const fx::Node* n) {
  auto it = constant_.find(n);
  if (it != constant_.end()) return it->second;
  bool c = false;
  if (n->op() == fx::Opcode::kGetAttr) {
    c = true;
  } else if (n->op() == fx::Opcode::kCallModule) {
    // An observer, FakeQuantize or Q/DQ of a constant (shape ops share qparams).
    auto m = gm_.get_submodule(n->target());
    const bool q = dynamic_cast<FakeQuantize*>(m.get()) || dynamic_cast<QuantDequant*>(m.get()) || dynamic_cast<ObserverBase*>(m.get());
    c = q && !n->args().empty() && n->args()[0].is_node() && constant_node(n->args()[0].node);
  } else if (n->op() == fx::Opcode::kCallFunction && n->target().rfind("aten::", 0) == 0) {
    // x.new_zeros(size) reads only x's dtype and device: a constant when its size is.
    const std::string& t = n->target();
    const bool like = t.rfind("aten::new_zeros", 0) == 0 || t.rfind("aten::new_ones", 0) == 0 || t.rfind("aten::new_full", 0) == 0;
    c = true;
    for (size_t i = like ? 1 : 0; i < n->args().size(); ++i)
      fx::for_each_node(n->args()[i], [&](const fx::Node* in) { c = c && constant_node(in); });
    for (const auto& kv : n->kwargs()) fx::for_each_node(kv.second, [&](const fx::Node* in) { c = c && constant_node(in); });
  }
  constant_[n] = c;
  return c;
}

bool Exporter::integer_constant(fx::Node* n) {
  if (!constant_node(n)) return false;
  if (!folded_ready_) evaluate_constants();
  auto it = folded_.find(n->name());
  return it != folded_.end() && !it->second.is_floating_point();
}

void Exporter::fold_constant(fx::Node* n) {
  if (!folded_ready_) evaluate_constants();
  auto it = folded_.find(n->name());
  if (auto l = folded_lists_.find(n->name()); it == folded_.end() && l != folded_lists_.end()) {
    // A list of constant tensors (meshgrid of aranges): one initializer per item, read by getitem.
    std::vector<std::string> items;
    for (size_t i = 0; i < l->second.size(); ++i) {
      const at::Tensor& t = l->second[i];
      items.push_back(init(n->name() + "_" + std::to_string(i), t.is_floating_point() ? t.to(at::kFloat) : t));
    }
    tuple_items_[n] = items;
    rank_[n] = l->second.empty() ? -1 : static_cast<int>(l->second[0].dim());
    return;
  }
  if (it == folded_.end()) unsupported(*n, "a constant that is not a tensor (nor a list of tensors)");
  at::Tensor t = it->second;
  // An integer or bool value (indices, a mask) is left for its consumers, constants
  // too, to fold with it (Swin's masked_fill); value() writes it for the first
  // consumer that is not a constant, so no initializer goes unread.
  rank_[n] = static_cast<int>(t.dim());
  if (!t.is_floating_point()) return;
  names_[n] = init(n->name(), t.to(at::kFloat));
}

void Exporter::evaluate_constants() {
  folded_ready_ = true;
  // One run of a copy of the graph that holds the constant nodes, what they read, and
  // the in-place ops on constants (Swin's attention mask is filled slice by slice),
  // returning every constant op's value (after all those in-place ops).
  auto g = gm_.copy();
  std::set<const fx::Node*> keep;
  std::vector<fx::Node*> todo, wanted;
  for (fx::Node* x : g->graph().nodes()) {
    const fx::Node* orig = gm_.graph().find_node(x->name());
    if (!orig || x->op() == fx::Opcode::kGetAttr || x->op() == fx::Opcode::kPlaceholder || !constant_node(orig)) continue;
    wanted.push_back(x);
    todo.push_back(x);
  }
  if (wanted.empty()) return;
  while (!todo.empty()) {
    fx::Node* x = todo.back();
    todo.pop_back();
    if (!keep.insert(x).second) continue;
    for (fx::Node* in : x->input_nodes()) todo.push_back(in);
  }
  g->graph().erase_node(g->graph().output_node());
  auto nodes = g->graph().nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (!keep.count(*it) && (*it)->op() != fx::Opcode::kPlaceholder) g->graph().erase_node(*it);
  std::vector<fx::Argument> outs;
  for (fx::Node* w : wanted) outs.emplace_back(w);
  g->graph().output(fx::Argument::tuple(outs));
  // Inputs, for what reads only their dtype (x.new_zeros): zeros of the input shape.
  std::vector<c10::IValue> dummy;
  for (size_t i = 0; i < g->graph().placeholders().size(); ++i) {
    std::vector<int64_t> shape = i < opt_.input_shapes.size() ? opt_.input_shapes[i] : std::vector<int64_t>{};
    for (auto& d : shape) d = d < 0 ? 1 : d;
    const std::string dt = i < opt_.input_dtypes.size() ? opt_.input_dtypes[i] : "float32";
    dummy.emplace_back(shape.empty() ? at::Tensor() : at::zeros(shape, fx::input_scalar_type(dt)));
  }
  const auto values = g->forward(std::move(dummy)).toTupleRef().elements();
  for (size_t i = 0; i < wanted.size(); ++i)
    if (values[i].isTensor()) {
      folded_[wanted[i]->name()] = values[i].toTensor().detach().clone();
    } else if (values[i].isTensorList()) {
      for (const at::Tensor& t : values[i].toTensorVector()) folded_lists_[wanted[i]->name()].push_back(t.detach().clone());
    }
}

}  // namespace qfx::quant::detail
