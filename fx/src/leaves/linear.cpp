// Leaf records of torch.nn's linear layers: Linear and Identity.
#include <torch/nn/modules/linear.h>

#include "registry.h"

namespace qfx::fx::detail {
namespace {

using c10::IValue;

std::optional<LoadedModule> trace_linear(const ScriptReader& r) {
  if (!r.has_tensor("weight")) return std::nullopt;
  if (!r.scripted() && !r.op({"aten::linear"})) return std::nullopt;
  const at::Tensor w = r.tensor("weight");
  const bool bias = r.has_tensor("bias");
  torch::nn::Linear m(torch::nn::LinearOptions(w.size(1), w.size(0)).bias(bias));
  r.tie("weight", m->weight);
  if (bias) r.tie("bias", m->bias);
  return leaf(m);
}

std::optional<LoadedModule> rebuild_linear(const std::string&, const LeafArgs& a) {
  const at::Tensor w = a.tensor("weight"), b = a.tensor("bias");
  if (!w.defined() || w.dim() != 2) return std::nullopt;
  torch::nn::Linear m(torch::nn::LinearOptions(w.size(1), w.size(0)).bias(b.defined()));
  share(m->weight, w);
  if (b.defined()) share(m->bias, b);
  return leaf(m);
}

void save_linear(const torch::nn::LinearImpl& m, ModuleConfig& c) {
  c.insert("in_features", m.options.in_features());
  c.insert("out_features", m.options.out_features());
  c.insert("bias", m.options.bias());
}

std::shared_ptr<torch::nn::LinearImpl> load_linear(const IValue& c) {
  return torch::nn::Linear(torch::nn::LinearOptions(config_at(c, "in_features").toInt(), config_at(c, "out_features").toInt())
                               .bias(config_at(c, "bias").toBool()))
      .ptr();
}

// Identity: a traced one calls no op at all.
std::optional<LoadedModule> trace_identity(const ScriptReader& r) {
  if (!r.scripted() && !r.no_ops()) return std::nullopt;
  return leaf(torch::nn::Identity());
}

}  // namespace

void register_linear_leaves(LeafRegistry& r) {
  r.add(leaf_record<torch::nn::LinearImpl>("Linear", save_linear, load_linear)
            .traced(trace_linear)
            .rebuilt_from({"aten::linear"}, rebuild_linear)
            .owns({"weight", "bias"}));
  r.add(plain_leaf_record<torch::nn::IdentityImpl>("Identity").traced(trace_identity));
}

}  // namespace qfx::fx::detail
