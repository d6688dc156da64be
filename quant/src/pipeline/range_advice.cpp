// Ranges that waste int8 codes, from the observers' statistics (see range_advice.h).
#include "range_advice.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace qfx::quant::detail {
namespace {

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

// The histogram's mass in [lo, hi) of value space, bins cut where the interval cuts them.
double mass_in(const nlohmann::json& h, double lo, double hi) {
  const double start = h["lo"].get<double>(), w = h["width"].get<double>();
  double m = 0;
  const auto& counts = h["counts"];
  for (size_t i = 0; i < counts.size(); ++i) {
    const double b0 = start + w * static_cast<double>(i), b1 = b0 + w;
    const double overlap = std::max(0.0, std::min(b1, hi) - std::max(b0, lo));
    if (w > 0) m += counts[i].get<double>() * overlap / w;
  }
  return m;
}

// The value below which `q` of the histogram's mass lies (linear within a bin).
double quantile(const nlohmann::json& h, double total, double q) {
  const double start = h["lo"].get<double>(), w = h["width"].get<double>();
  double seen = 0;
  const auto& counts = h["counts"];
  for (size_t i = 0; i < counts.size(); ++i) {
    const double c = counts[i].get<double>();
    if (c > 0 && seen + c >= q * total) return start + w * (static_cast<double>(i) + (q * total - seen) / c);
    seen += c;
  }
  return start + w * static_cast<double>(counts.size());
}

nlohmann::json finding(const nlohmann::json& o, const char* problem, const std::string& detail, const std::string& fix) {
  return {{"node", o["node"]}, {"problem", problem}, {"detail", detail}, {"fix", fix}};
}

}  // namespace

nlohmann::json range_advice(const nlohmann::json& observers) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& o : observers) {
    const double lo = o["clip"][0].get<double>(), hi = o["clip"][1].get<double>();
    if (o.value("qscheme", "") == "symmetric" && o["min"].get<double>() >= 0 && hi > 0)
      out.push_back(finding(o, "symmetric_nonnegative",
                            fmt("a symmetric range over values never below 0 (min %.4g): the negative half of the codes is unused",
                                o["min"].get<double>()),
                            "activation qscheme: affine (or dtype u8), where the target allows it"));
    if (!o.contains("hist") || hi <= lo) continue;
    const nlohmann::json& h = o["hist"];
    double total = 0;
    for (const auto& c : h["counts"]) total += c.get<double>();
    if (total <= 0) continue;
    // Quantized ranges always hold 0 (its code is the zero point): values between 0 and
    // a positive lower bound (a ReLU's zeros) are not clipped.
    const double outside = 1.0 - mass_in(h, std::min(lo, 0.0), std::max(hi, 0.0)) / total;
    if (outside > kClippedShare)
      out.push_back(finding(o, "clipped", fmt("clipping to [%.4g, %.4g] cuts %.2f%% of the values", lo, hi, 100 * outside),
                            "activation algorithm: minmax, or percentile with a higher percentile"));
    const double span = quantile(h, total, 0.9995) - quantile(h, total, 0.0005);
    if (span < kConcentratedSpan * (hi - lo))
      out.push_back(finding(o, "concentrated",
                            fmt("99.9%% of the values lie in %.2f%% of the range [%.4g, %.4g]: outliers stretch it",
                                100 * span / (hi - lo), lo, hi),
                            "activation algorithm: mse or percentile (a histogram observer)"));
  }
  return out;
}

}  // namespace qfx::quant::detail
