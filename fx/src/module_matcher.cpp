// Module-type chain matching (see module_matcher.h).
#include "qfx/fx/module_matcher.h"

#include <set>
#include <stdexcept>
#include "qfx/error.h"

namespace qfx::fx {

std::string module_type_name(const Node& n, const GraphModule& gm) {
  if (n.op() != Opcode::kCallModule) return "";
  std::string cls;
  auto it = n.meta().find("module_type");
  if (it != n.meta().end() && it->second.isString()) {
    cls = it->second.toStringRef();
  } else if (auto m = gm.get_submodule(n.target())) {
    cls = m->name();
  }
  for (const char* sep : {".", "::"}) {
    const auto p = cls.rfind(sep);
    if (p != std::string::npos) cls = cls.substr(p + std::string(sep).size());
  }
  if (cls.size() > 4 && cls.compare(cls.size() - 4, 4, "Impl") == 0) cls.resize(cls.size() - 4);
  return cls;
}

bool consumes_only(const Node* user, const Node* producer) {
  if (user->args().empty() || !user->args()[0].is_node() || user->args()[0].node != producer) return false;
  for (size_t i = 1; i < user->args().size(); ++i)
    if (!user->args()[i].is_const()) return false;
  for (const auto& kv : user->kwargs())
    if (!kv.second.is_const()) return false;
  return true;
}

std::vector<std::vector<Node*>> match_module_pattern(const GraphModule& gm, const std::vector<std::string>& types) {
  if (types.empty()) throw ArgumentError("match_module_pattern: empty pattern");
  std::vector<std::vector<Node*>> chains;
  std::set<const Node*> taken;
  for (Node* n : gm.graph().nodes()) {
    if (taken.count(n) || module_type_name(*n, gm) != types[0]) continue;
    std::vector<Node*> chain{n};
    while (chain.size() < types.size()) {
      Node* cur = chain.back();
      if (cur->users().size() != 1) break;
      Node* u = cur->users()[0];
      if (taken.count(u) || module_type_name(*u, gm) != types[chain.size()] || !consumes_only(u, cur)) break;
      chain.push_back(u);
    }
    if (chain.size() != types.size()) continue;
    taken.insert(chain.begin(), chain.end());
    chains.push_back(std::move(chain));
  }
  return chains;
}

}  // namespace qfx::fx
