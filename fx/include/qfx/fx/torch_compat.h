// Differences between the libtorch versions qfx builds against (1.13 and 2.x).
#pragma once

#include <torch/version.h>

#include <variant>

namespace qfx::fx::compat {

/// A pointer to the alternative `T` of a libtorch option variant (a module's
/// `padding`, `padding_mode`, ...), or nullptr when it holds another one.
/// libtorch 1.13 has its own `c10::variant`; libtorch 2.x uses `std::variant`.
template <class T, class V>
auto get_if(V* v) {
#if TORCH_VERSION_MAJOR >= 2
  return std::get_if<T>(v);
#else
  return c10::get_if<T>(v);
#endif
}

}  // namespace qfx::fx::compat
