// Error messages as the qfx commands print them (no libtorch: the runtime-only build uses it too).
#pragma once

#include <string>

namespace qfx::cli {

/// An error message cut to one readable line: a message that quotes a huge value
/// keeps its first 4000 characters and says how many more there were.
inline std::string clip_message(const std::string& m) {
  constexpr size_t kMax = 4000;
  if (m.size() <= kMax) return m;
  return m.substr(0, kMax) + "... (" + std::to_string(m.size() - kMax) + " more characters)";
}

}  // namespace qfx::cli
