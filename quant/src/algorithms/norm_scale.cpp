// LayerNorm parameters scaled in place of the model's (see norm_scale.h).
#include "norm_scale.h"

#include <ATen/ATen.h>

namespace qfx::quant::detail {

std::optional<NormParams> as_norm(fx::GraphModule& gm, fx::Node* n) {
  NormParams r;
  r.node = n;
  if (n->op() == fx::Opcode::kCallModule) {
    r.module = std::dynamic_pointer_cast<torch::nn::LayerNormImpl>(gm.get_submodule(n->target()));
    if (!r.module || !r.module->options.elementwise_affine()) return std::nullopt;
    return r;
  }
  if (n->op() != fx::Opcode::kCallFunction || n->target().rfind("aten::layer_norm", 0) != 0) return std::nullopt;
  if (n->args().size() < 4 || !n->args()[2].is_node() || !n->args()[3].is_node()) return std::nullopt;
  const fx::Node *w = n->args()[2].node, *b = n->args()[3].node;
  if (w->op() != fx::Opcode::kGetAttr || b->op() != fx::Opcode::kGetAttr) return std::nullopt;
  if (w->users().size() != 1 || b->users().size() != 1) return std::nullopt;  // shared with another node
  r.weight_attr = w->target();
  r.bias_attr = b->target();
  return r;
}

void scale_norm(fx::GraphModule& gm, NormParams& norm, const at::Tensor& s, const std::string& suffix) {
  if (norm.module) {
    torch::nn::LayerNorm copy(norm.module->options);
    copy->weight.detach().copy_(norm.module->weight.detach() / s);
    copy->bias.detach().copy_(norm.module->bias.detach() / s);
    auto impl = copy.ptr();
    gm.replace_submodule(norm.node->target(), impl, fx::tensor_call_fn(impl));
    norm.module = impl;
    return;
  }
  for (int i : {2, 3}) {
    fx::Node* attr = norm.node->args()[static_cast<size_t>(i)].node;
    const std::string name = gm.graph().unique_name(attr->target() + suffix);
    const at::Tensor t = gm.get_attr(attr->target());
    gm.add_tensor(name, (t.detach() / s).contiguous(), /*is_buffer=*/false);
    attr->set_target(name);
  }
}

}  // namespace qfx::quant::detail
