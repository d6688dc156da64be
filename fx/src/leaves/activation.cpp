// Leaf records of the activations: ReLU, ReLU6, Sigmoid, Tanh, SiLU, Hardswish,
// Hardsigmoid, LeakyReLU, GELU and Softmax.
#include <ATen/ops/hardsigmoid.h>
#include <ATen/ops/hardswish.h>
#include <torch/nn/modules/activation.h>

#include "registry.h"

namespace qfx::fx::detail {
namespace {

using c10::IValue;
using Built = std::optional<LoadedModule>;

/// torch.nn.Hardswish (libtorch has no module class for it): x -> at::hardswish(x), any shape.
class HardswishLeaf : public torch::nn::Module {
 public:
  HardswishLeaf() : torch::nn::Module("Hardswish") {}
  at::Tensor forward(const at::Tensor& x) { return at::hardswish(x); }
};

/// torch.nn.Hardsigmoid (no libtorch module class either): x -> at::hardsigmoid(x).
class HardsigmoidLeaf : public torch::nn::Module {
 public:
  HardsigmoidLeaf() : torch::nn::Module("Hardsigmoid") {}
  at::Tensor forward(const at::Tensor& x) { return at::hardsigmoid(x); }
};

// An activation without options: a traced module must be exactly one of
// `traced_ops`; an exported node one of `export_targets`.
template <typename Impl>
LeafModuleRecord plain(const std::string& cls, std::vector<std::string> traced_ops,
                       std::vector<std::string> export_targets) {
  return plain_leaf_record<Impl>(cls)
      .traced([ops = std::move(traced_ops)](const ScriptReader& r) -> Built {
        if (!r.scripted() && !r.op(ops)) return std::nullopt;
        return leaf(std::make_shared<Impl>());
      })
      .rebuilt_from(std::move(export_targets),
                    [](const std::string&, const LeafArgs&) -> Built { return leaf(std::make_shared<Impl>()); });
}

// ReLU6 as hardtanh: only hardtanh(x, 0, 6) is the layer.
LeafModuleRecord relu6() {
  std::vector<std::string> ops = {"aten::relu6", "aten::hardtanh", "aten::hardtanh_"};
  return plain<torch::nn::ReLU6Impl>("ReLU6", {"aten::hardtanh", "aten::hardtanh_", "aten::relu6"}, {})
      .rebuilt_from(ops, [](const std::string&, const LeafArgs& a) -> Built {
        if (a.num("min_val", 0) != 0 || a.num("max_val", 6) != 6) return std::nullopt;
        return leaf(torch::nn::ReLU6());
      });
}

LeafModuleRecord leaky_relu() {
  const std::vector<std::string> ops = {"aten::leaky_relu", "aten::leaky_relu_"};
  return leaf_record<torch::nn::LeakyReLUImpl>(
             "LeakyReLU",
             [](const torch::nn::LeakyReLUImpl& m, ModuleConfig& c) { c.insert("negative_slope", m.options.negative_slope()); },
             [](const IValue& c) {
               return torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(config_at(c, "negative_slope").toDouble())).ptr();
             })
      .traced([ops](const ScriptReader& r) -> Built {
        auto s = r.param("negative_slope", ops, 1);
        if (!s) return std::nullopt;
        return leaf(torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(s->toDouble())));
      })
      .rebuilt_from(ops, [](const std::string&, const LeafArgs& a) -> Built {
        return leaf(torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(a.num("negative_slope", 0.01))));
      });
}

LeafModuleRecord gelu() {
  return leaf_record<torch::nn::GELUImpl>(
             "GELU", [](const torch::nn::GELUImpl& m, ModuleConfig& c) { c.insert("approximate", m.options.approximate()); },
             [](const IValue& c) {
               return torch::nn::GELU(torch::nn::GELUOptions().approximate(config_at(c, "approximate").toStringRef())).ptr();
             })
      .traced([](const ScriptReader& r) -> Built {
        auto a = r.param("approximate", {"aten::gelu"}, 1);
        if (!a) return std::nullopt;
        return leaf(torch::nn::GELU(torch::nn::GELUOptions().approximate(a->toStringRef())));
      })
      .rebuilt_from({"aten::gelu", "aten::gelu_"}, [](const std::string&, const LeafArgs& a) -> Built {
        return leaf(torch::nn::GELU(torch::nn::GELUOptions().approximate(a.string("approximate", "none"))));
      });
}

// Softmax along one dim (nn.Softmax(dim=None) picks it from the rank: not a leaf).
LeafModuleRecord softmax() {
  return leaf_record<torch::nn::SoftmaxImpl>(
             "Softmax", [](const torch::nn::SoftmaxImpl& m, ModuleConfig& c) { c.insert("dim", m.options.dim()); },
             [](const IValue& c) { return torch::nn::Softmax(torch::nn::SoftmaxOptions(config_at(c, "dim").toInt())).ptr(); })
      .traced([](const ScriptReader& r) -> Built {
        auto d = r.param("dim", {"aten::softmax"}, 1);
        if (!d || d->isNone()) return std::nullopt;
        return leaf(torch::nn::Softmax(torch::nn::SoftmaxOptions(d->toInt())));
      })
      .rebuilt_from({"aten::softmax.int", "aten::_softmax"}, [](const std::string&, const LeafArgs& a) -> Built {
        if (!a.arg("dim")) return std::nullopt;
        return leaf(torch::nn::Softmax(torch::nn::SoftmaxOptions(a.integer("dim", -1))));
      });
}

}  // namespace

void register_activation_leaves(LeafRegistry& r) {
  r.add(plain<torch::nn::ReLUImpl>("ReLU", {"aten::relu", "aten::relu_"}, {"aten::relu", "aten::relu_"}));
  r.add(relu6());
  r.add(plain<torch::nn::SigmoidImpl>("Sigmoid", {"aten::sigmoid"}, {"aten::sigmoid", "aten::sigmoid_"}));
  r.add(plain<torch::nn::TanhImpl>("Tanh", {"aten::tanh"}, {"aten::tanh", "aten::tanh_"}));
  r.add(plain<torch::nn::SiLUImpl>("SiLU", {"aten::silu", "aten::silu_"}, {"aten::silu", "aten::silu_"}));
  r.add(plain<HardswishLeaf>("Hardswish", {"aten::hardswish", "aten::hardswish_"}, {"aten::hardswish", "aten::hardswish_"}));
  r.add(plain<HardsigmoidLeaf>("Hardsigmoid", {"aten::hardsigmoid", "aten::hardsigmoid_"},
                               {"aten::hardsigmoid", "aten::hardsigmoid_"}));
  r.add(leaky_relu());
  r.add(gelu());
  r.add(softmax());
}

}  // namespace qfx::fx::detail
