// Test helper: counting the nodes of a GraphModule by kind.
#pragma once

#include <string>

#include "qfx/fx/graph_module.h"

namespace qfx::test {

/// The call_module nodes whose meta "module_type" is `type` ("Conv2d", "LayerNorm").
inline int count_modules(const qfx::fx::GraphModule& gm, const std::string& type) {
  int n = 0;
  for (const auto* node : gm.graph().nodes())
    if (node->op() == qfx::fx::Opcode::kCallModule) {
      auto it = node->meta().find("module_type");
      n += it != node->meta().end() && it->second.toStringRef() == type;
    }
  return n;
}

}  // namespace qfx::test
