// Min/max statistics (qfx/stats/min_max.h).
#include "qfx/stats/min_max.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "fold.h"
#include "qfx/error.h"

namespace qfx::stats {
namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();

using detail::fold;

// channel_min_max without the NaN/Inf refusal: *nonfinite says whether one occurred.
void channel_fold(const FloatView& v, int64_t axis, std::vector<float>* lo, std::vector<float>* hi, bool* nonfinite) {
  const int64_t rank = static_cast<int64_t>(v.shape.size());
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw DataError("per-channel statistics of '" + v.name + "': channel axis " + std::to_string(axis) +
                    " out of range for a tensor of rank " + std::to_string(rank));
  // The stored order: the logical one, or with axis 1 innermost.
  std::vector<int64_t> stored = v.shape;
  int64_t at = a;
  if (v.channels_last && rank >= 3) {
    stored.erase(stored.begin() + 1);
    stored.push_back(v.shape[1]);
    at = a == 0 ? 0 : (a == 1 ? rank - 1 : a - 1);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < at; ++i) outer *= stored[static_cast<size_t>(i)];
  for (int64_t i = at + 1; i < rank; ++i) inner *= stored[static_cast<size_t>(i)];
  const int64_t C = stored[static_cast<size_t>(at)];
  lo->assign(static_cast<size_t>(C), kInf);
  hi->assign(static_cast<size_t>(C), -kInf);
  float* cl = lo->data();
  float* ch = hi->data();
  uint32_t nf = 0;
  if (inner == 1) {  // channels innermost: rows of C values
    for (int64_t r = 0; r < outer; ++r) {
      const float* p = v.data + r * C;
#pragma omp simd reduction(| : nf)
      for (int64_t c = 0; c < C; ++c) fold(p[c], cl[c], ch[c], nf);
    }
  } else {
#pragma omp parallel for reduction(| : nf) if (outer * C * inner > 65536)
    for (int64_t c = 0; c < C; ++c) {
      float l = kInf, h = -kInf;
      uint32_t f = 0;
      for (int64_t o = 0; o < outer; ++o) {
        const float* p = v.data + (o * C + c) * inner;
#pragma omp simd reduction(min : l) reduction(max : h) reduction(| : f)
        for (int64_t i = 0; i < inner; ++i) fold(p[i], l, h, f);
      }
      cl[c] = l;
      ch[c] = h;
      nf |= f;
    }
  }
  *nonfinite = nf != 0;
}
}  // namespace

void detail::throw_if_nonfinite(bool nonfinite, const std::string& name) {
  if (nonfinite) throw DataError("observed tensor '" + (name.empty() ? std::string("?") : name) + "' contains NaN or Inf");
}

int64_t FloatView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void min_max(const float* x, int64_t n, float* lo_out, float* hi_out, bool* nonfinite) {
  float lo = kInf, hi = -kInf;
  uint32_t nf = 0;
#pragma omp parallel for simd reduction(min : lo) reduction(max : hi) reduction(| : nf) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) fold(x[i], lo, hi, nf);
  *lo_out = lo;
  *hi_out = hi;
  *nonfinite = nf != 0;
}

void checked_min_max(const float* x, int64_t n, const std::string& name, float* lo, float* hi) {
  bool nonfinite = false;
  min_max(x, n, lo, hi, &nonfinite);
  detail::throw_if_nonfinite(nonfinite, name);
}

void channel_min_max(const FloatView& v, int64_t axis, std::vector<float>* lo, std::vector<float>* hi) {
  bool nonfinite = false;
  channel_fold(v, axis, lo, hi, &nonfinite);
  detail::throw_if_nonfinite(nonfinite, v.name);
}

void accumulate_range(float* min, float* max, const float* lo, const float* hi, size_t n, bool first, double c) {
  const float cf = static_cast<float>(c);
  for (size_t i = 0; i < n; ++i) {
    if (first) {
      min[i] = lo[i];
      max[i] = hi[i];
    } else if (c == 0) {
      min[i] = std::min(lo[i], min[i]);
      max[i] = std::max(hi[i], max[i]);
    } else {  // two roundings, as torch's float tensors compute it (no fused multiply-add)
      const float dl = lo[i] - min[i], dh = hi[i] - max[i];
      const float pl = cf * dl, ph = cf * dh;
      min[i] = min[i] + pl;
      max[i] = max[i] + ph;
    }
  }
}

void MinMax::observe(const FloatView& v) {
  const int64_t n = v.numel();
  if (n == 0) return;
  float lo, hi;
  bool nonfinite;
  min_max(v.data, n, &lo, &hi, &nonfinite);
  min = count == 0 ? lo : std::min(min, lo);
  max = count == 0 ? hi : std::max(max, hi);
  count += n;
}

void PerChannelMinMax::observe(const FloatView& v) {
  MinMax::observe(v);
  if (v.shape.size() < 2 || v.numel() == 0) return;
  std::vector<float> lo, hi;
  bool nonfinite;
  channel_fold(v, 1, &lo, &hi, &nonfinite);
  const bool first = channel_min.empty();
  if (!first && channel_min.size() != lo.size())
    throw DataError("per-channel tap of '" + v.name + "': channel count changed from " +
                    std::to_string(channel_min.size()) + " to " + std::to_string(lo.size()));
  if (first) channel_min.resize(lo.size()), channel_max.resize(hi.size());
  accumulate_range(channel_min.data(), channel_max.data(), lo.data(), hi.data(), lo.size(), first, 0.0);
}

}  // namespace qfx::stats
