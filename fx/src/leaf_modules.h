// Internal: building native libtorch modules for standard torch.nn leaves found
// in TorchScript, with parameters shared with the TorchScript module.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <optional>
#include <string>

#include "qfx/fx/graph_module.h"

namespace qfx::fx::detail {

/// "__torch__.torch.nn.modules.conv.___torch_mangle_3.Conv2d" -> "torch.nn.modules.conv.Conv2d".
std::string demangle_type(const std::string& qualified_name);
/// The class name alone: "Conv2d".
std::string short_type(const std::string& qualified_name);

struct LeafModule {
  std::shared_ptr<torch::nn::Module> module;
  CallFn fn;
};

/// If `sm` is a standard torch.nn leaf this tracer supports and its
/// hyper-parameters can be read (class constants of a scripted module, or the
/// single aten op of a traced one), returns a native module whose parameters
/// and buffers are the very tensors of `sm` (`sm` is re-pointed at them).
/// Returns nullopt otherwise; the caller then traces through the module.
std::optional<LeafModule> make_leaf(torch::jit::Module& sm);

}  // namespace qfx::fx::detail
