// Internal: building native libtorch modules for standard torch.nn leaves found
// in TorchScript, with parameters shared with the TorchScript module.
#pragma once

#include <torch/csrc/jit/api/module.h>
#include <torch/nn/options/upsampling.h>

#include <optional>
#include <string>

#include "qfx/fx/graph_module.h"
#include "qfx/fx/serialize.h"
#include "qfx/fx/upsample.h"

namespace qfx::fx::detail {

/// "__torch__.torch.nn.modules.conv.___torch_mangle_3.Conv2d" -> "torch.nn.modules.conv.Conv2d".
std::string demangle_type(const std::string& qualified_name);
/// The class name alone: "Conv2d".
std::string short_type(const std::string& qualified_name);

/// A native module and the callable call_module nodes run for it.
using LeafModule = LoadedModule;

/// torch.nn.Hardswish / Hardsigmoid (libtorch has no module class for them):
/// x -> at::hardswish(x) / at::hardsigmoid(x), any shape.
class HardswishLeaf : public torch::nn::Module {
 public:
  HardswishLeaf() : torch::nn::Module("Hardswish") {}
  at::Tensor forward(const at::Tensor& x);
};
class HardsigmoidLeaf : public torch::nn::Module {
 public:
  HardsigmoidLeaf() : torch::nn::Module("Hardsigmoid") {}
  at::Tensor forward(const at::Tensor& x);
};

using ::qfx::fx::UpsampleLeaf;

/// Registers the serializers of the torch.nn leaves above and of the native
/// libtorch modules the tracers create (serialize.cpp calls it once).
void register_leaf_serializers();
/// Adds `s` to the registry (replacing one of the same type) without
/// triggering the built-in registration (register_module_serializer does).
void add_serializer(ModuleSerializer s);

/// If `sm` is a standard torch.nn leaf this tracer supports and its
/// hyper-parameters can be read (class constants of a scripted module, or the
/// single aten op of a traced one), returns a native module whose parameters
/// and buffers are the very tensors of `sm` (`sm` is re-pointed at them).
/// Returns nullopt otherwise; the caller then traces through the module.
std::optional<LeafModule> make_leaf(torch::jit::Module& sm);

}  // namespace qfx::fx::detail
