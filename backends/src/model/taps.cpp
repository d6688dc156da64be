// Observer taps: min/max, per-channel min/max or histograms of named float values,
// collected while the model runs (the executor hands them each value as it is
// computed, the same observation that serves Model::run's watch callback).
#include <algorithm>
#include <cmath>

#include <omp.h>

#include "../simd/tap_histogram.h"
#include "model_impl.h"
#include "qfx/error.h"

namespace qfx::runtime {

std::shared_ptr<const Model::Impl::TapConfig> Model::Impl::current_taps() const {
  std::lock_guard<std::mutex> lk(tap_mu);
  return taps_cfg;
}

// Folds one tensor into its statistics, in parallel (OpenMP); histograms count into
// per-thread scratch sized by set_taps, so taps allocate nothing per run.
void Model::Impl::tap(const TapConfig& cfg, int v, const Tensor& t, bool nhwc) const {
  if (t.dtype() != DType::kFloat32) return;
  const float* x = t.data<float>();
  const int64_t n = t.numel();
  if (n == 0) return;
  std::lock_guard<std::mutex> lk(tap_mu);  // tap_scratch and stats
  if (taps_cfg->generation != cfg.generation) return;  // set_taps / reset_taps since this run began
  TapStats& s = stats[v];
  float lo = x[0], hi = x[0];
  if (cfg.kind == TapKind::kHistogram) {  // min, max and counts in one pass
    if (s.histogram.empty()) s.histogram.assign(static_cast<size_t>(cfg.opts.bins), 0.0);
    // Threads as many as set_taps sized the scratch for (the count may have changed since).
    const int64_t per_thread = cfg.opts.bins * tap_histogram_copies(cfg.opts.bins);
    const int threads = std::max(1, std::min({omp_get_max_threads(), 256, static_cast<int>(tap_scratch.size() / per_thread)}));
    tap_histogram(x, n, cfg.opts.lo, cfg.opts.hi, cfg.opts.bins, tap_scratch.data(), threads, s.histogram.data(), &lo,
                  &hi);
  } else {
#pragma omp parallel for simd reduction(min : lo) reduction(max : hi) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      lo = x[i] < lo ? x[i] : lo;
      hi = x[i] > hi ? x[i] : hi;
    }
  }
  if (s.count == 0) {
    s.min = lo;
    s.max = hi;
  } else {
    s.min = std::min(s.min, lo);
    s.max = std::max(s.max, hi);
  }
  s.count += n;
  if (cfg.kind == TapKind::kPerChannelMinMax && t.shape().size() >= 2) {
    const int64_t N = t.shape()[0], C = t.shape()[1], inner = n / (N * C);
    if (s.channel_min.empty()) {
      s.channel_min.assign(static_cast<size_t>(C), INFINITY);
      s.channel_max.assign(static_cast<size_t>(C), -INFINITY);
    }
    float* cmin = s.channel_min.data();
    float* cmax = s.channel_max.data();
    if (nhwc) {  // channels innermost: rows of C values
      for (int64_t r = 0; r < n / C; ++r) {
        const float* p = x + r * C;
        for (int64_t c = 0; c < C; ++c) {
          cmin[c] = p[c] < cmin[c] ? p[c] : cmin[c];
          cmax[c] = p[c] > cmax[c] ? p[c] : cmax[c];
        }
      }
    } else {
#pragma omp parallel for if (n > 65536)
      for (int64_t c = 0; c < C; ++c) {
        float cl = cmin[c], ch = cmax[c];
        for (int64_t b = 0; b < N; ++b) {
          const float* p = x + (b * C + c) * inner;
          for (int64_t i = 0; i < inner; ++i) {
            cl = p[i] < cl ? p[i] : cl;
            ch = p[i] > ch ? p[i] : ch;
          }
        }
        cmin[c] = cl;
        cmax[c] = ch;
      }
    }
  }
}

void Model::set_taps(const std::vector<std::string>& names, TapKind kind, TapOptions options) {
  Impl& im = *impl_;
  std::vector<int> ids;
  for (const auto& n : names) {
    auto it = im.value_id.find(n);
    if (it == im.value_id.end() || im.const_of[static_cast<size_t>(it->second)])
      throw DataError("cannot tap '" + n + "': no such tensor computed by the model");
    ids.push_back(it->second);
  }
  if (kind == TapKind::kHistogram && (options.bins < 1 || !(options.hi > options.lo)))
    throw DataError("histogram taps need bins >= 1 and hi > lo");
  auto cfg = std::make_shared<Impl::TapConfig>();
  cfg->tapped.assign(im.value_name.size(), false);
  for (int v : ids) cfg->tapped[static_cast<size_t>(v)] = true;
  cfg->kind = kind;
  cfg->opts = options;
  std::lock_guard<std::mutex> lk(im.tap_mu);
  cfg->generation = im.taps_cfg->generation + 1;
  im.taps_cfg = std::move(cfg);
  im.stats.clear();
  im.tap_scratch.assign(kind == TapKind::kHistogram ? static_cast<size_t>(options.bins * tap_histogram_copies(options.bins)) *
                                                       static_cast<size_t>(omp_get_max_threads())
                                                 : 0,
                       0u);
}

std::map<std::string, TapStats> Model::taps() const {
  std::lock_guard<std::mutex> lk(impl_->tap_mu);
  std::map<std::string, TapStats> out;
  for (const auto& kv : impl_->stats) out[impl_->value_name[static_cast<size_t>(kv.first)]] = kv.second;
  return out;
}

void Model::reset_taps() {
  std::lock_guard<std::mutex> lk(impl_->tap_mu);
  auto cfg = std::make_shared<Impl::TapConfig>(*impl_->taps_cfg);
  ++cfg->generation;
  impl_->taps_cfg = std::move(cfg);
  impl_->stats.clear();
}

}  // namespace qfx::runtime
