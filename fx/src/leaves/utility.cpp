// Leaf records of the layers that only pass values on in eval mode or reshape
// them: Dropout and Flatten.
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "registry.h"

namespace qfx::fx::detail {
namespace {

using c10::IValue;
using Built = std::optional<LoadedModule>;

// Dropout: rebuilt only from an eval-mode node (train=False).
LeafModuleRecord dropout() {
  const std::vector<std::string> ops = {"aten::dropout", "aten::dropout_"};
  return leaf_record<torch::nn::DropoutImpl>(
             "Dropout", [](const torch::nn::DropoutImpl& m, ModuleConfig& c) { c.insert("p", m.options.p()); },
             [](const IValue& c) { return torch::nn::Dropout(torch::nn::DropoutOptions(config_at(c, "p").toDouble())).ptr(); })
      .traced([ops](const ScriptReader& r) -> Built {
        auto p = r.param("p", ops, 1);
        if (!p) return std::nullopt;
        return leaf(torch::nn::Dropout(torch::nn::DropoutOptions(p->toDouble())));
      })
      .rebuilt_from(ops, [](const std::string&, const LeafArgs& a) -> Built {
        if (a.boolean("train", false)) return std::nullopt;
        return leaf(torch::nn::Dropout(torch::nn::DropoutOptions(a.num("p", 0.5))));
      });
}

torch::nn::Flatten make_flatten(int64_t start_dim, int64_t end_dim) {
  return torch::nn::Flatten(torch::nn::FlattenOptions().start_dim(start_dim).end_dim(end_dim));
}

LeafModuleRecord flatten() {
  return leaf_record<torch::nn::FlattenImpl>(
             "Flatten",
             [](const torch::nn::FlattenImpl& m, ModuleConfig& c) {
               c.insert("start_dim", m.options.start_dim());
               c.insert("end_dim", m.options.end_dim());
             },
             [](const IValue& c) {
               return make_flatten(config_at(c, "start_dim").toInt(), config_at(c, "end_dim").toInt()).ptr();
             })
      .traced([](const ScriptReader& r) -> Built {
        auto s = r.param("start_dim", {"aten::flatten"}, 1);
        auto e = r.param("end_dim", {"aten::flatten"}, 2);
        if (!s || !e) return std::nullopt;
        return leaf(make_flatten(s->toInt(), e->toInt()));
      })
      .rebuilt_from({"aten::flatten.using_ints"}, [](const std::string&, const LeafArgs& a) -> Built {
        return leaf(make_flatten(a.integer("start_dim", 0), a.integer("end_dim", -1)));
      });
}

}  // namespace

void register_utility_leaves(LeafRegistry& r) {
  r.add(dropout());
  r.add(flatten());
}

}  // namespace qfx::fx::detail
