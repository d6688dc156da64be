// Internal: reading the arguments of one node of a torch.export program (its
// serialized JSON, schema argument names) — the leaf records' `rebuild` side
// (see registry.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>
#include <torch/expanding_array.h>

#include <functional>
#include <string>
#include <vector>

namespace qfx::fx::detail {

/// Thrown by a rebuild when an argument has a form the layer cannot take (an int
/// list of another length): the registry then leaves the node a call_function.
struct NotThisLayer {};

/// Reads what a node's inputs hold, by schema argument name ("weight", "stride"):
/// literals, and the tensor an argument names when it is a lifted parameter or buffer.
struct LeafArgs {
  const nlohmann::json& node;                                     ///< the serialized node
  std::function<at::Tensor(const std::string& value)> tensor_of;  ///< lifted tensor named by a value, or undefined

  /// The input named `name`, or nullptr when the node omits it (its default applies).
  const nlohmann::json* arg(const std::string& name) const;
  /// The lifted tensor of input `name`; undefined when absent, None or computed.
  at::Tensor tensor(const std::string& name) const;
  /// Float (or int) input `name`, or `def` when absent or of another kind.
  double num(const std::string& name, double def) const;
  /// Int input `name`, or `def`.
  int64_t integer(const std::string& name, int64_t def) const;
  /// Bool input `name`, or `def`.
  bool boolean(const std::string& name, bool def) const;
  /// String input `name` ("same", "tanh"), or `def`.
  std::string string(const std::string& name, const std::string& def) const;
  /// Int-list (or int) input `name`; empty when absent or of another kind.
  std::vector<int64_t> int_list(const std::string& name) const;
  /// Int-list input `name` as D values (one value applies to every dim; absent:
  /// `def` for every dim). Throws NotThisLayer for a list of another length.
  template <size_t D>
  torch::ExpandingArray<D> ints(const std::string& name, int64_t def) const {
    std::vector<int64_t> v = int_list(name);
    if (v.empty()) v = {def};
    if (v.size() == 1) v.assign(D, v[0]);
    if (v.size() != D) throw NotThisLayer{};
    return torch::ExpandingArray<D>(v);
  }
};

/// Makes parameter or buffer `param` of a rebuilt module share `t`'s storage
/// (the archive's tensor, not a copy).
void share(at::Tensor& param, const at::Tensor& t);

}  // namespace qfx::fx::detail
