// qfx bench's statistics of repeated timings: the median and the interquartile
// range, and when their spread says the machine was busy.
#pragma once

#include <algorithm>
#include <vector>

namespace qfx::cli {

/// The timings of one side: median and interquartile range, in milliseconds.
struct Timing {
  double median = 0, iqr = 0;
  /// The spread relative to the median: above kNoisyTimings the ratios are not to be trusted.
  double spread() const { return median > 0 ? iqr / median : 0; }
};

/// The interquartile range as a fraction of the median above which `qfx bench` warns.
constexpr double kNoisyTimings = 0.25;

/// Median and interquartile range (lower index rules: v[n/2], v[3n/4] - v[n/4]) of
/// `ms`, in milliseconds; zeros for an empty list.
inline Timing timing_of(std::vector<double> ms) {
  if (ms.empty()) return {};
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[(ms.size() * 3) / 4] - ms[ms.size() / 4]};
}

/// Whether any side's repeated timings spread by more than kNoisyTimings of their
/// median; `iters` below 5 give no usable spread and never warn. `*worst` receives
/// the largest spread.
inline bool timings_disagree(const std::vector<Timing>& sides, int iters, double* worst = nullptr) {
  double w = 0;
  for (const auto& t : sides) w = std::max(w, t.spread());
  if (worst) *worst = w;
  return iters >= 5 && w > kNoisyTimings;
}

}  // namespace qfx::cli
