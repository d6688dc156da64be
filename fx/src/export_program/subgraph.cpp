// Value names of a serialized subgraph put in their own scope (subgraph.h).
#include "subgraph.h"

namespace qfx::fx::detail {

namespace {

using nlohmann::json;

// Renames, in place, the value names an argument or output refers to: as_tensor /
// as_tensors items' "name", and the "as_name" of symbolic values, at any depth.
void rename_values(json& j, const std::string& prefix) {
  if (j.is_array()) {
    for (auto& x : j) rename_values(x, prefix);
    return;
  }
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    json& v = it.value();
    if (it.key() == "as_tensor" && v.is_object() && v.contains("name") && v["name"].is_string()) {
      v["name"] = prefix + v["name"].get<std::string>();
    } else if (it.key() == "as_tensors" && v.is_array()) {
      for (auto& t : v)
        if (t.is_object() && t.contains("name") && t["name"].is_string()) t["name"] = prefix + t["name"].get<std::string>();
    } else if (it.key() == "as_name" && v.is_string()) {
      v = prefix + v.get<std::string>();
    } else if (it.key() != "as_graph") {  // a nested subgraph gets its own scope when it is read
      rename_values(v, prefix);
    }
  }
}

json prefixed_keys(const json& table, const std::string& prefix) {
  json out = json::object();
  if (table.is_object())
    for (auto it = table.begin(); it != table.end(); ++it) out[prefix + it.key()] = it.value();
  return out;
}

}  // namespace

json scoped_subgraph(const json& graph, const std::string& prefix) {
  json g = graph;
  for (const char* k : {"inputs", "outputs"})
    if (g.contains(k)) rename_values(g[k], prefix);
  if (g.contains("nodes"))
    for (auto& n : g["nodes"]) {
      if (n.contains("inputs"))
        for (auto& in : n["inputs"])
          if (in.contains("arg")) rename_values(in["arg"], prefix);
      if (n.contains("outputs")) rename_values(n["outputs"], prefix);
    }
  for (const char* k : {"tensor_values", "sym_int_values", "sym_bool_values", "sym_float_values"})
    if (g.contains(k)) g[k] = prefixed_keys(g[k], prefix);
  return g;
}

}  // namespace qfx::fx::detail
