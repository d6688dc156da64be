// Internal: the leaf-module registry. A leaf module is a standard torch.nn layer
// (Conv2d, BatchNorm2d, LeakyReLU, ...) that the graph keeps as one call_module
// node running a native libtorch module. Everything qfx knows about one leaf class
// is one LeafModuleRecord:
//   - trace:   build it from a torch.nn module found in a TorchScript file,
//   - rebuild: build it from the aten node a torch.export program calls for it
//              (the innermost nn_module_stack entry names the class),
//   - tensor_names: the lifted parameters and buffers the rebuilt module owns,
//   - save / load: its configuration in a saved GraphModule (serialize.h).
// Records are registered per layer family, one file each in this folder
// (conv.cpp, linear.cpp, norm.cpp, activation.cpp, pooling.cpp, utility.cpp,
// vision.cpp); adding a leaf class is one record in its family's file.
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "export_args.h"
#include "qfx/fx/graph_module.h"
#include "qfx/fx/serialize.h"
#include "script_args.h"

namespace qfx::fx::detail {

/// Builds the native module of a torch.nn leaf found in TorchScript, its parameters
/// and buffers tied to the TorchScript module's (ScriptReader::tie); nullopt when
/// the hyper-parameters cannot be read (the tracer then traces through the module).
/// Any exception it throws means the same.
using LeafTraceFn = std::function<std::optional<LoadedModule>(const ScriptReader& r)>;
/// Builds the native module from an exported program's node calling `target`
/// ("aten::conv2d.padding"), sharing the archive's tensors; nullopt (or
/// NotThisLayer) when the node is not the whole layer (it stays a call_function).
using LeafRebuildFn = std::function<std::optional<LoadedModule>(const std::string& target, const LeafArgs& a)>;

/// Everything qfx knows about one torch.nn leaf class.
struct LeafModuleRecord {
  std::string cls;  ///< torch.nn class name ("Conv2d"); saved as serializer type "torch.nn.<cls>"
  LeafTraceFn trace;                        ///< TorchScript frontend; empty: never a leaf there
  std::vector<std::string> export_targets;  ///< aten targets (with overload) that can be the whole layer
  LeafRebuildFn rebuild;                    ///< torch.export frontend; empty: never rebuilt
  /// The lifted inputs the rebuilt module owns, as suffixes of its path
  /// ("weight", "bias", "running_mean", ...); empty for a layer without tensors.
  std::vector<std::string> tensor_names;
  std::function<bool(const torch::nn::Module&)> matches;  ///< true for exactly the native class saved here
  std::function<c10::IValue(const torch::nn::Module&)> save;  ///< the module's options as a ModuleConfig
  std::function<LoadedModule(const c10::IValue& config)> load;  ///< rebuilds the module from `save`'s config

  /// Sets `trace`.
  LeafModuleRecord& traced(LeafTraceFn f);
  /// Sets `export_targets` and `rebuild`.
  LeafModuleRecord& rebuilt_from(std::vector<std::string> targets, LeafRebuildFn f);
  /// Sets `tensor_names`.
  LeafModuleRecord& owns(std::vector<std::string> names);
};

/// The call_module callable of native module `m` (x -> m->forward(x)).
template <typename M>
LoadedModule leaf(std::shared_ptr<M> m) {
  return {m, tensor_call_fn(m)};
}
/// The same for a libtorch module holder (torch::nn::Conv2d).
template <typename Holder>
LoadedModule leaf(Holder h) {
  return leaf(h.ptr());
}

/// A record for class `cls` whose native module is exactly `Impl` (typeid match:
/// a subclass needs a record of its own), saved with `save` and rebuilt with `load`.
template <typename Impl>
LeafModuleRecord leaf_record(std::string cls, std::function<void(const Impl&, ModuleConfig&)> save,
                             std::function<std::shared_ptr<Impl>(const c10::IValue&)> load) {
  LeafModuleRecord r;
  r.cls = std::move(cls);
  r.matches = [](const torch::nn::Module& m) { return typeid(m) == typeid(Impl); };
  r.save = [save = std::move(save)](const torch::nn::Module& m) {
    ModuleConfig c = make_config();
    save(dynamic_cast<const Impl&>(m), c);
    return c10::IValue(c);
  };
  r.load = [load = std::move(load)](const c10::IValue& c) { return leaf(load(c)); };
  return r;
}

/// A record for a class without options: saved as an empty configuration,
/// loaded as a default-constructed `Impl`.
template <typename Impl>
LeafModuleRecord plain_leaf_record(std::string cls) {
  return leaf_record<Impl>(
      std::move(cls), [](const Impl&, ModuleConfig&) {}, [](const c10::IValue&) { return std::make_shared<Impl>(); });
}

/// libtorch's option array as a plain list (for a ModuleConfig).
template <size_t D>
std::vector<int64_t> config_ints(const torch::ExpandingArray<D>& a) {
  return std::vector<int64_t>(a->begin(), a->end());
}
/// Throws IoError "expected `want` values, got `got`".
[[noreturn]] void throw_config_count(size_t want, size_t got);
/// Config entry `key` of `c` (an int list of D values) as libtorch's option array.
/// Throws IoError naming the count for another length, or `key` when absent.
template <size_t D>
torch::ExpandingArray<D> config_array(const c10::IValue& c, const std::string& key) {
  const std::vector<int64_t> x = config_at(c, key).toIntVector();
  if (x.size() != D) throw_config_count(D, x.size());
  return torch::ExpandingArray<D>(c10::IntArrayRef(x));
}

/// The records by class name, filled once from the family files.
class LeafRegistry {
 public:
  /// Adds `r`. Throws InternalError when its class is already registered.
  void add(LeafModuleRecord r);
  /// The record of class `cls` ("Conv2d"), or null.
  const LeafModuleRecord* find(const std::string& cls) const;
  /// Every record, by class name.
  const std::map<std::string, LeafModuleRecord>& records() const { return records_; }

 private:
  std::map<std::string, LeafModuleRecord> records_;
};

/// The built-in registry (conv, linear, norm, activation, pooling, utility and
/// vision families), filled on first use.
const LeafRegistry& leaf_registry();

/// Family registration functions (one per file in this folder).
void register_conv_leaves(LeafRegistry& r);
/// Linear, Identity.
void register_linear_leaves(LeafRegistry& r);
/// BatchNorm1d/2d/3d, LayerNorm.
void register_norm_leaves(LeafRegistry& r);
/// ReLU, ReLU6, Sigmoid, Tanh, SiLU, Hardswish, Hardsigmoid, LeakyReLU, GELU, Softmax.
void register_activation_leaves(LeafRegistry& r);
/// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d.
void register_pooling_leaves(LeafRegistry& r);
/// Dropout, Flatten.
void register_utility_leaves(LeafRegistry& r);
/// Upsample.
void register_vision_leaves(LeafRegistry& r);

/// If `sm` is a torch.nn module ("torch.nn.modules.*") of a registered class and
/// its record's `trace` reads it, returns the native module whose parameters and
/// buffers are the very tensors of `sm` (`sm` is re-pointed at them). Returns
/// nullopt otherwise; the caller then traces through the module.
std::optional<LoadedModule> make_leaf(torch::jit::Module& sm);

/// The native module for `cls` (the innermost nn_module_stack class, "Conv2d")
/// called through `target` ("aten::conv2d"), or nullopt when the node is not that
/// layer's whole computation (then it stays a call_function). Parameters and
/// buffers are the very tensors of the archive (shared, not copied).
std::optional<LoadedModule> rebuild_leaf(const std::string& cls, const std::string& target, const LeafArgs& a);

/// The names of the lifted inputs a rebuilt `cls` module owns (the record's
/// tensor_names; empty for an unknown class).
const std::vector<std::string>& leaf_tensor_names(const std::string& cls);

/// Registers every record's serializer (type "torch.nn.<cls>"); serialize.cpp
/// calls it once, before any other registration.
void register_leaf_serializers();
/// Adds `s` to the serializer registry (replacing one of the same type) without
/// triggering the built-in registration (register_module_serializer does).
void add_serializer(ModuleSerializer s);

}  // namespace qfx::fx::detail
