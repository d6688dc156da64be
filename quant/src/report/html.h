// Internal: small helpers shared by the report.html writers.
#pragma once

#include <nlohmann/json.hpp>

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

/// `j[key]` when `j` is an object holding `key` with a value of type T (a number for
/// double / int64_t, a string, an array or object for json); `fallback` otherwise.
/// Never throws: a report.json from another qfx version draws what it can.
template <typename T>
T get(const nlohmann::json& j, const char* key, T fallback) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  const nlohmann::json& v = j[key];
  if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string() ? v.get<std::string>() : fallback;
  } else if constexpr (std::is_same_v<T, nlohmann::json>) {
    return v;
  } else if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean() ? v.get<bool>() : fallback;
  } else {
    return v.is_number() ? v.get<T>() : fallback;
  }
}

}  // namespace qfx::quant::report
