// Internal: small helpers shared by the report.html writers.
#pragma once

#include <cstdio>
#include <string>

namespace qfx::quant::report {

/// Text made safe inside HTML / SVG elements and attribute values.
inline std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

/// A number with `digits` significant digits ("12.3", "0.00041").
inline std::string num(double x, int digits = 4) {
  char b[40];
  std::snprintf(b, sizeof b, "%.*g", digits, x);
  return b;
}

}  // namespace qfx::quant::report
