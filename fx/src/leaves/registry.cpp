// The leaf-module registry and the three readers of its records: the TorchScript
// tracer (make_leaf), the torch.export reader (rebuild_leaf, leaf_tensor_names)
// and serialization (register_leaf_serializers). See registry.h.
#include "registry.h"

#include <algorithm>

#include "qfx/error.h"

namespace qfx::fx::detail {

LeafModuleRecord& LeafModuleRecord::traced(LeafTraceFn f) {
  trace = std::move(f);
  return *this;
}

LeafModuleRecord& LeafModuleRecord::rebuilt_from(std::vector<std::string> targets, LeafRebuildFn f) {
  export_targets = std::move(targets);
  rebuild = std::move(f);
  return *this;
}

LeafModuleRecord& LeafModuleRecord::owns(std::vector<std::string> names) {
  tensor_names = std::move(names);
  return *this;
}

void throw_config_count(size_t want, size_t got) {
  throw IoError("expected " + std::to_string(want) + " values, got " + std::to_string(got));
}

void LeafRegistry::add(LeafModuleRecord r) {
  if (r.cls.empty() || !r.matches || !r.save || !r.load)
    throw InternalError("leaf module record '" + r.cls + "' lacks its class name or serializer");
  const std::string cls = r.cls;
  if (!records_.emplace(cls, std::move(r)).second)
    throw InternalError("leaf module class '" + cls + "' is registered twice");
}

const LeafModuleRecord* LeafRegistry::find(const std::string& cls) const {
  auto it = records_.find(cls);
  return it == records_.end() ? nullptr : &it->second;
}

const LeafRegistry& leaf_registry() {
  static const LeafRegistry r = [] {
    LeafRegistry reg;
    register_conv_leaves(reg);
    register_linear_leaves(reg);
    register_norm_leaves(reg);
    register_activation_leaves(reg);
    register_pooling_leaves(reg);
    register_utility_leaves(reg);
    register_vision_leaves(reg);
    return reg;
  }();
  return r;
}

std::optional<LoadedModule> make_leaf(torch::jit::Module& sm) {
  const std::string type = demangle_type(sm.type()->name()->qualifiedName());
  if (type.rfind("torch.nn.modules.", 0) != 0) return std::nullopt;
  if (!sm.find_method("forward")) return std::nullopt;
  const LeafModuleRecord* rec = leaf_registry().find(short_type(type));
  if (!rec || !rec->trace) return std::nullopt;
  try {
    ScriptReader r(sm);
    return rec->trace(r);
  } catch (const std::exception&) {
    // Hyper-parameters of an unexpected form: trace through the module instead.
    return std::nullopt;
  }
}

std::optional<LoadedModule> rebuild_leaf(const std::string& cls, const std::string& target, const LeafArgs& a) {
  const LeafModuleRecord* rec = leaf_registry().find(cls);
  if (!rec || !rec->rebuild) return std::nullopt;
  const auto& ts = rec->export_targets;
  if (std::find(ts.begin(), ts.end(), target) == ts.end()) return std::nullopt;
  try {
    return rec->rebuild(target, a);
  } catch (const NotThisLayer&) {
    return std::nullopt;
  }
}

const std::vector<std::string>& leaf_tensor_names(const std::string& cls) {
  static const std::vector<std::string> none;
  const LeafModuleRecord* rec = leaf_registry().find(cls);
  return rec ? rec->tensor_names : none;
}

void register_leaf_serializers() {
  for (const auto& [cls, rec] : leaf_registry().records()) {
    ModuleSerializer s;
    s.type = "torch.nn." + cls;
    s.matches = rec.matches;
    s.save = rec.save;
    s.load = rec.load;
    add_serializer(std::move(s));
  }
}

}  // namespace qfx::fx::detail
