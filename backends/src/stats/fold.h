// The statistics library's per-value step and its refusal of NaN / Inf (internal).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace qfx::stats::detail {

/// Folds `v` into a running min, max and NaN/Inf flag (exponent all ones), in a form
/// `omp simd` loops vectorise; NaN leaves min and max as they are.
__attribute__((always_inline)) inline void fold(float v, float& l, float& h, uint32_t& nf) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  nf |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  l = v < l ? v : l;
  h = v > h ? v : h;
}

/// Throws qfx::DataError "observed tensor 'NAME' contains NaN or Inf" if `nonfinite`
/// (fold's flag) is set.
void throw_if_nonfinite(bool nonfinite, const std::string& name);

}  // namespace qfx::stats::detail
