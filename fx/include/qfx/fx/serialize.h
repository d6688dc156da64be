// Saving and loading GraphModules: graph, module tree, parameters, buffers and
// the state of every module (observers, fake quantizes, ...), plus the
// TorchScript archive wrapped callables come from, in one file that
// `torch.load` in Python and `torch::pickle_load` in C++ can open.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>

#include "qfx/fx/graph_module.h"

namespace qfx::fx {

/// Version of the file format `save_graph_module` writes. A file with a larger
/// version is refused (IoError); smaller versions stay readable.
constexpr int64_t kGraphModuleFormatVersion = 1;

/// The `format` entry of every saved GraphModule.
constexpr const char* kGraphModuleFormat = "qfx.GraphModule";

/// A module rebuilt from its saved configuration, and the callable a
/// call_module node runs for it.
struct LoadedModule {
  std::shared_ptr<torch::nn::Module> module;
  CallFn fn;
};

/// How one module class is saved and rebuilt.
///
/// `save` returns the module's configuration (hyper-parameters and submodule
/// configurations, never tensors: every parameter and buffer of the tree is
/// saved by name and loaded after `load`, so `load` only has to register
/// tensors of the right names, any value). `load` builds the module from that
/// configuration; it may throw anything, the loader reports it as an IoError
/// naming the file and the module path.
struct ModuleSerializer {
  std::string type;  ///< unique name stored in the file ("torch.nn.Conv2d", "qfx.FakeQuantize")
  std::function<bool(const torch::nn::Module&)> matches;          ///< true if this serializer handles it
  std::function<c10::IValue(const torch::nn::Module&)> save;     ///< configuration (picklable IValue)
  std::function<LoadedModule(const c10::IValue& config)> load;   ///< rebuilds the module
};

/// A module configuration: a str -> IValue dictionary (picklable values only).
using ModuleConfig = c10::impl::GenericDict;

/// An empty configuration dictionary (str keys, any values).
ModuleConfig make_config();

/// `config[key]`. Throws IoError naming `key` if `config` is not a
/// dictionary or lacks it (the loader reports it with the file and module).
c10::IValue config_at(const c10::IValue& config, const std::string& key);

/// Registers `s` (a later registration of the same `type` replaces the earlier
/// one). qfx registers the torch.nn leaves the tracers create; qfx_quant
/// registers its observers, fake quantizes, fused and quantized modules.
void register_module_serializer(ModuleSerializer s);

/// The configuration record {"type": str, "config": IValue} of `m`, for
/// serializers whose modules hold submodules (a fused module's batch norm).
/// Throws qfx::IoError naming `m`'s class if no serializer handles it.
c10::IValue save_module_record(const torch::nn::Module& m);
/// Rebuilds a module from a record written by `save_module_record`. Throws
/// qfx::IoError for an unknown type or a malformed record.
LoadedModule load_module_record(const c10::IValue& record);

/// Writes `gm` to `path` (atomically: a failure leaves no file and an existing
/// file untouched).
///
/// The file is a `torch.save`-compatible zip (torch::pickle_save) holding a
/// dictionary: `format` ("qfx.GraphModule"), `version`, `training`, `graph`
/// (one dictionary per node: op, name, target, args, kwargs, meta), `code` (the
/// readable forward), `modules` (path, type, configuration of every module a
/// call_module node calls), `parameters` and `buffers` (dotted name -> tensor),
/// `frozen` (parameters with requires_grad false) and `script` (the TorchScript
/// archive wrapped methods, functions and modules come from, as uint8 bytes, or
/// None). docs/fx.md, "Saving a GraphModule", documents each entry.
///
/// Node meta entries whose values are not plain data (None, bool, int, float,
/// str, tensor, device, and lists/tuples/dicts of them) are not saved.
/// Throws qfx::IoError naming the path, node or module that cannot be saved (a
/// module class without a serializer, a wrapped function that is not in the
/// model's TorchScript archive) or if the file cannot be written.
void save_graph_module(const GraphModule& gm, const std::string& path);

/// Reads a GraphModule written by `save_graph_module`, in this or another
/// process: the same graph (node names, targets, arguments, meta), module tree,
/// parameter and buffer values, training mode and module state, so it computes
/// bit-identical outputs. C++ functions kept whole with `fx::wrap` are resolved
/// by operator name when run: register them (call `wrap`) before running.
/// Throws qfx::IoError naming `path` if it is missing, not a saved GraphModule,
/// written by a newer format version, or inconsistent (a module type without a
/// serializer in this build, tensors that do not fit the rebuilt modules).
std::shared_ptr<GraphModule> load_graph_module(const std::string& path);

}  // namespace qfx::fx
