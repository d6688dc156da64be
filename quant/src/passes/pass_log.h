// Internal: QFX_LOG=passes prints what each pass changed and declined.
#pragma once

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "qfx/quant/passes.h"

namespace qfx::quant {

inline bool pass_log_enabled() {
  const char* v = std::getenv("QFX_LOG");
  return v && std::strstr(v, "passes") != nullptr;
}

inline void log_pass(const std::string& pass, const PassReport& r) {
  if (!pass_log_enabled()) return;
  for (const auto& c : r.changes) std::cerr << "[" << pass << "] " << c << "\n";
  for (const auto& d : r.declined) std::cerr << "[" << pass << "] declined: " << d << "\n";
  for (const auto& w : r.warnings) std::cerr << "[" << pass << "] warning: " << w << "\n";
}

}  // namespace qfx::quant
