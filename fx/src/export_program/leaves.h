// Internal: the standard torch.nn layers an exported program calls, rebuilt as
// native libtorch modules from the aten node and the parameters it reads.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>

#include "qfx/fx/serialize.h"

namespace qfx::fx::detail {

/// Reads what a node's inputs hold: the tensor an argument names (a lifted
/// parameter or buffer; undefined for anything else), by schema argument name.
struct LeafArgs {
  const nlohmann::json& node;                                     ///< the serialized node
  std::function<at::Tensor(const std::string& value)> tensor_of;  ///< lifted tensor named by a value, or undefined
  /// The input named `name`, or nullptr when the node omits it (its default applies).
  const nlohmann::json* arg(const std::string& name) const;
  /// The lifted tensor of input `name`; undefined when absent, None or computed.
  at::Tensor tensor(const std::string& name) const;
};

/// The native module for `cls` (the innermost nn_module_stack class, "Conv2d")
/// called through `target` ("aten::conv2d"), or nullopt when the node is not that
/// layer's whole computation (then it stays a call_function). Parameters and
/// buffers are the very tensors of the archive (shared, not copied).
std::optional<LoadedModule> rebuild_leaf(const std::string& cls, const std::string& target, const LeafArgs& a);

/// The names of the lifted inputs a rebuilt `cls` module owns, as suffixes of its
/// path ("weight", "bias", "running_mean", ...).
const std::vector<std::string>& leaf_tensor_names(const std::string& cls);

}  // namespace qfx::fx::detail
