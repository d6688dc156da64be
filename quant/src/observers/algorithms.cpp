#include "qfx/quant/algorithms.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "qfx/error.h"

namespace qfx::quant {

double Histogram::total() const { return std::accumulate(counts.begin(), counts.end(), 0.0); }

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kMinMax: return "minmax";
    case Algorithm::kPercentile: return "percentile";
    case Algorithm::kEntropy: return "entropy";
    case Algorithm::kMSE: return "mse";
    case Algorithm::kAuto: return "auto";
  }
  return "?";
}

Algorithm parse_algorithm(const std::string& s) {
  if (s == "minmax") return Algorithm::kMinMax;
  if (s == "percentile") return Algorithm::kPercentile;
  if (s == "entropy" || s == "kl") return Algorithm::kEntropy;
  if (s == "mse") return Algorithm::kMSE;
  if (s == "auto") return Algorithm::kAuto;
  throw ConfigError("unknown calibration algorithm '" + s + "' (expected minmax, percentile, entropy, mse or auto)");
}

namespace {

// Histogram of |x|: bins of the same width starting at 0. The bin that straddles
// 0 is split in proportion to its parts on each side.
std::vector<double> abs_histogram(const Histogram& h) {
  const size_t n = h.counts.size();
  const double amax = std::max(std::abs(h.lo), std::abs(h.lo + static_cast<double>(n) * h.width));
  const size_t m = static_cast<size_t>(std::ceil(amax / h.width)) + 1;
  std::vector<double> out(m, 0.0);
  for (size_t i = 0; i < n; ++i) {
    if (h.counts[i] == 0) continue;
    const double a = h.lo + static_cast<double>(i) * h.width, b = a + h.width;
    // Split [a, b) into its negative and positive parts, map each to |x|.
    // Each |x| part [x0, x0 + width) lands in the bin holding x0 (a shift of
    // less than one bin).
    auto add = [&](double x0, double c) { out[std::min(static_cast<size_t>(x0 / h.width), m - 1)] += c; };
    if (a >= 0) add(a, h.counts[i]);
    else if (b <= 0) add(-b, h.counts[i]);
    else add(0, h.counts[i]);
  }
  return out;
}

float percentile_value(const std::vector<double>& counts, double lo, double width, double fraction) {
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  if (total <= 0) return static_cast<float>(lo);
  const double target = fraction * total;
  double acc = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (acc + counts[i] >= target) {
      const double f = counts[i] > 0 ? (target - acc) / counts[i] : 0.0;
      return static_cast<float>(lo + (static_cast<double>(i) + f) * width);
    }
    acc += counts[i];
  }
  return static_cast<float>(lo + static_cast<double>(counts.size()) * width);
}

// KL(P || Q), TensorRT's procedure: P is the reference (the window's bins with
// the clipped tails' mass added to its end bins); Q is the window's own bins
// quantized into `levels` buckets and expanded back, each bucket's mass spread
// over its non-empty source bins. Empty Q bins where P has mass get a tiny mass.
double kl_divergence(const std::vector<double>& ref, const std::vector<double>& src, size_t levels) {
  const size_t m = src.size();
  if (m == 0) return std::numeric_limits<double>::infinity();
  std::vector<double> q(m, 0.0);
  const double step = static_cast<double>(m) / static_cast<double>(levels);
  for (size_t b = 0; b < levels; ++b) {
    const size_t s0 = static_cast<size_t>(std::floor(static_cast<double>(b) * step));
    const size_t e0 = std::min(m, static_cast<size_t>(std::floor(static_cast<double>(b + 1) * step)));
    double sum = 0;
    size_t nz = 0;
    for (size_t k = s0; k < e0; ++k) {
      sum += src[k];
      nz += src[k] > 0;
    }
    if (nz == 0) continue;
    for (size_t k = s0; k < e0; ++k)
      if (src[k] > 0) q[k] = sum / static_cast<double>(nz);
  }
  const double rs = std::accumulate(ref.begin(), ref.end(), 0.0), qs = std::accumulate(q.begin(), q.end(), 0.0);
  if (rs <= 0 || qs <= 0) return std::numeric_limits<double>::infinity();
  double kl = 0;
  for (size_t k = 0; k < m; ++k) {
    if (ref[k] <= 0) continue;
    const double pi = ref[k] / rs;
    const double qi = std::max(q[k] / qs, 1e-12);
    kl += pi * std::log(pi / qi);
  }
  return kl;
}

std::pair<float, float> entropy_symmetric(const Histogram& h, const QuantSpec& spec) {
  std::vector<double> ah = abs_histogram(h);
  const size_t levels = static_cast<size_t>((spec.quant_max - spec.quant_min + 1) / 2);
  const size_t n = ah.size();
  if (n <= levels) return {-static_cast<float>(n * h.width), static_cast<float>(n * h.width)};
  // Coarsen very fine |x| histograms so the search stays O(2048 * bins).
  double best = std::numeric_limits<double>::infinity();
  size_t best_i = n;
  const size_t stride = std::max<size_t>(1, (n - levels) / 512);
  for (size_t i = levels; i <= n; i += stride) {
    std::vector<double> src(ah.begin(), ah.begin() + static_cast<long>(i));
    std::vector<double> ref = src;
    for (size_t j = i; j < n; ++j) ref.back() += ah[j];
    const double kl = kl_divergence(ref, src, levels);
    if (kl < best) {
      best = kl;
      best_i = i;
    }
  }
  const float t = static_cast<float>(static_cast<double>(best_i) * h.width);
  return {-t, t};
}

std::pair<float, float> entropy_affine(const Histogram& h, const QuantSpec& spec, int stride_opt) {
  const size_t n = h.counts.size();
  const size_t levels = static_cast<size_t>(spec.quant_max - spec.quant_min + 1);
  if (n <= levels) return {h.min, h.max};
  size_t first = 0, last = n;
  while (first < n && h.counts[first] == 0) ++first;
  while (last > first && h.counts[last - 1] == 0) --last;
  if (last - first <= levels) return {h.min, h.max};
  const size_t stride = stride_opt > 0 ? static_cast<size_t>(stride_opt) : std::max<size_t>(1, (last - first) / 48);
  double best = std::numeric_limits<double>::infinity();
  size_t ba = first, bb = last;
  std::vector<double> src, ref;
  for (size_t a = first; a + levels <= last; a += stride) {
    for (size_t b = last; b >= a + levels; b = b > stride ? b - stride : 0) {
      src.assign(h.counts.begin() + static_cast<long>(a), h.counts.begin() + static_cast<long>(b));
      ref = src;
      for (size_t k = 0; k < a; ++k) ref.front() += h.counts[k];
      for (size_t k = b; k < n; ++k) ref.back() += h.counts[k];
      const double kl = kl_divergence(ref, src, levels);
      if (kl < best) {
        best = kl;
        ba = a;
        bb = b;
      }
      if (b < stride) break;
    }
  }
  return {static_cast<float>(h.lo + static_cast<double>(ba) * h.width),
          static_cast<float>(h.lo + static_cast<double>(bb) * h.width)};
}

std::pair<float, float> mse_search(const Histogram& h, const QuantSpec& spec, int steps) {
  steps = std::max(steps, 4);
  const float lo0 = std::min(h.min, 0.0f), hi0 = std::max(h.max, 0.0f);
  double best = std::numeric_limits<double>::infinity();
  std::pair<float, float> br{h.min, h.max};
  if (spec.qscheme == QScheme::kSymmetric) {
    const float amax = std::max(-lo0, hi0);
    for (int i = 1; i <= steps; ++i) {
      const float t = amax * static_cast<float>(i) / static_cast<float>(steps);
      const double e = quantization_mse(h, -t, t, spec);
      if (e < best) { best = e; br = {-t, t}; }
    }
    return br;
  }
  for (int i = 1; i <= steps; ++i) {
    for (int j = 1; j <= steps; ++j) {
      const float lo = lo0 * static_cast<float>(i) / static_cast<float>(steps);
      const float hi = hi0 * static_cast<float>(j) / static_cast<float>(steps);
      const double e = quantization_mse(h, lo, hi, spec);
      if (e < best) { best = e; br = {lo, hi}; }
    }
  }
  return br;
}

}  // namespace

double quantization_mse(const Histogram& h, float lo, float hi, const QuantSpec& spec) {
  int64_t zp = 0;
  const float scale = compute_qparams_scalar(lo, hi, spec, &zp);
  double err = 0, total = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    const double c = h.counts[i];
    if (c == 0) continue;
    const float x = static_cast<float>(h.center(i));
    const double d = static_cast<double>(x) - fake_quant_scalar(x, scale, zp, spec.quant_min, spec.quant_max);
    err += c * d * d;
    total += c;
  }
  return total > 0 ? err / total : 0.0;
}

std::pair<float, float> clip_range(const Histogram& h, Algorithm algo, const QuantSpec& spec,
                                   const AlgorithmOptions& opts, Algorithm* chosen) {
  if (chosen) *chosen = algo;
  if (h.counts.empty() || h.total() <= 0 || h.width <= 0) return {h.min, h.max};
  switch (algo) {
    case Algorithm::kMinMax:
      return {h.min, h.max};
    case Algorithm::kPercentile: {
      if (opts.percentile < 50 || opts.percentile > 100)
        throw ConfigError("percentile must be between 50 and 100");
      const double keep = opts.percentile / 100.0;
      if (spec.qscheme == QScheme::kSymmetric) {
        std::vector<double> ah = abs_histogram(h);
        const float t = std::min(percentile_value(ah, 0.0, h.width, keep), std::max(-h.min, h.max));
        return {-t, t};
      }
      const double tail = (1.0 - keep) / 2.0;
      float lo = percentile_value(h.counts, h.lo, h.width, tail);
      float hi = percentile_value(h.counts, h.lo, h.width, 1.0 - tail);
      return {std::max(lo, h.min), std::min(hi, h.max)};
    }
    case Algorithm::kEntropy:
      return spec.qscheme == QScheme::kSymmetric ? entropy_symmetric(h, spec) : entropy_affine(h, spec, opts.entropy_stride);
    case Algorithm::kMSE:
      return mse_search(h, spec, opts.mse_steps);
    case Algorithm::kAuto: {
      double best = std::numeric_limits<double>::infinity();
      std::pair<float, float> br{h.min, h.max};
      for (Algorithm a : {Algorithm::kMinMax, Algorithm::kPercentile, Algorithm::kEntropy, Algorithm::kMSE}) {
        auto r = clip_range(h, a, spec, opts);
        const double e = quantization_mse(h, r.first, r.second, spec);
        if (e < best) {
          best = e;
          br = r;
          if (chosen) *chosen = a;
        }
      }
      return br;
    }
  }
  return {h.min, h.max};
}

}  // namespace qfx::quant
