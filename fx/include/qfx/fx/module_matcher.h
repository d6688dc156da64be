// Matching chains of call_module nodes by module type: torch.fx's documented
// conv + batch-norm fuser pattern, as a reusable matcher (quant::fuse_fx is built
// on the same primitives).
#pragma once

#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"

namespace qfx::fx {

/// The class of the module a call_module node calls, without namespace or
/// libtorch's `Impl` suffix: "Conv2d", "BatchNorm2d", "ReLU", or a user's class
/// ("DecodeHead"). The tracer's `meta["module_type"]` (the original TorchScript
/// class) wins over the C++ object's name. "" for other opcodes or an unknown target.
std::string module_type_name(const Node& n, const GraphModule& gm);

/// True if `user` reads `producer` as its first positional argument and every
/// other argument (positional or keyword) is a literal: the only way a value
/// flows along a fusable chain.
bool consumes_only(const Node* user, const Node* producer);

/// Every chain n0 -> n1 -> ... of call_module nodes whose module types equal
/// `types` in order (module_type_name), where each n(i+1) consumes only n(i)'s
/// value (consumes_only) and n(i) has no other user, so the chain can be fused
/// into one module. Chains do not overlap; they come in graph order. Throws
/// ArgumentError for an empty `types`.
std::vector<std::vector<Node*>> match_module_pattern(const GraphModule& gm, const std::vector<std::string>& types);

}  // namespace qfx::fx
