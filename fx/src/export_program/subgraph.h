// Internal: the subgraphs of torch.export's higher-order operators, read into the
// graph that calls them.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace qfx::fx::detail {

/// A copy of a serialized subgraph (`as_graph.graph` of torch/_export/serde/schema.py:
/// inputs, nodes, outputs, tensor_values, sym_*_values) with every value name
/// prefixed by `prefix`, so that its values cannot meet the caller's of the same
/// name when its nodes are read into the caller's graph. Node and argument names
/// are kept.
nlohmann::json scoped_subgraph(const nlohmann::json& graph, const std::string& prefix);

}  // namespace qfx::fx::detail
