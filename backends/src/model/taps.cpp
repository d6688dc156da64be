// Observer taps: statistics (qfx/stats) of named float values, collected while the
// model runs (the executor hands them each value as it is computed, the same
// observation that serves Model::run's watch callback).
#include <algorithm>

#include "model_impl.h"
#include "qfx/error.h"
#include "qfx/stats/histogram.h"
#include "qfx/stats/min_max.h"

namespace qfx::runtime {

std::shared_ptr<const Model::Impl::TapConfig> Model::Impl::current_taps() const {
  std::lock_guard<std::mutex> lk(tap_mu);
  return taps_cfg;
}

void Model::Impl::tap(const TapConfig& cfg, int v, const Tensor& t, bool nhwc) const {
  if (t.dtype() != DType::kFloat32) return;  // empty tensors too: a statistic may count observations
  const size_t vi = static_cast<size_t>(v);
  const bool as_stored = cfg.layout == WatchLayout::kAsStored || (cfg.layout == WatchLayout::kLoaded && watch_as_stored[vi]);
  Tensor plain;
  if (nhwc && !as_stored) {
    plain = Tensor(t.shape(), t.dtype());
    nhwc_to_nchw(t.raw(), plain.raw(), t.shape(), dtype_size(t.dtype()));
  }
  const Tensor& seen = plain.defined() ? plain : t;
  stats::FloatView view;
  view.data = seen.data<float>();
  view.shape = seen.shape();
  view.channels_last = nhwc && as_stored;
  view.name = value_name[vi];
  std::lock_guard<std::mutex> lk(tap_mu);
  if (taps_cfg->generation != cfg.generation) return;  // set_taps / reset_taps since this run began
  cfg.stat[vi]->observe(view);
}

void Model::Impl::publish_taps(const std::vector<int>& ids, TapFactory make, WatchLayout layout) {
  auto cfg = std::make_shared<TapConfig>();
  cfg->stat.resize(value_name.size());
  for (int v : ids) {
    const std::string& name = value_name[static_cast<size_t>(v)];
    cfg->stat[static_cast<size_t>(v)] = make(name);
    if (!cfg->stat[static_cast<size_t>(v)]) throw ArgumentError("set_taps: the tap factory made no statistic for '" + name + "'");
  }
  cfg->make = std::move(make);
  cfg->layout = layout;
  std::lock_guard<std::mutex> lk(tap_mu);
  cfg->generation = taps_cfg->generation + 1;
  taps_cfg = std::move(cfg);
}

void Model::set_taps(const std::vector<std::string>& names, const TapFactory& make, WatchLayout layout) {
  Impl& im = *impl_;
  std::vector<int> ids;
  for (const auto& n : names) {
    auto it = im.value_id.find(n);
    if (it == im.value_id.end() || im.const_of[static_cast<size_t>(it->second)])
      throw DataError("cannot tap '" + n + "': no such tensor computed by the model");
    ids.push_back(it->second);
  }
  if (!make) throw ArgumentError("set_taps: no tap factory");
  im.publish_taps(ids, make, layout);
}

void Model::set_taps(const std::vector<std::string>& names, TapKind kind, TapOptions options) {
  if (kind == TapKind::kHistogram && (options.bins < 1 || !(options.hi >= options.lo)))
    throw DataError("histogram taps need bins >= 1 and hi > lo (or lo == hi for a growing range)");
  TapFactory make = [kind, options](const std::string&) -> std::shared_ptr<stats::Statistic> {
    switch (kind) {
      case TapKind::kMinMax: return std::make_shared<stats::MinMax>();
      case TapKind::kPerChannelMinMax: return std::make_shared<stats::PerChannelMinMax>();
      case TapKind::kHistogram:
        if (options.hi > options.lo) return std::make_shared<stats::Histogram>(options.bins, options.lo, options.hi);
        return std::make_shared<stats::Histogram>(options.bins);
    }
    return nullptr;
  };
  set_taps(names, make, WatchLayout::kAsStored);
}

void Model::clear_taps() { impl_->publish_taps({}, nullptr, WatchLayout::kAsStored); }

std::map<std::string, TapStats> Model::taps() const {
  const Impl& im = *impl_;
  std::lock_guard<std::mutex> lk(im.tap_mu);
  std::map<std::string, TapStats> out;
  const auto& cfg = *im.taps_cfg;
  for (size_t v = 0; v < cfg.stat.size(); ++v) {
    const stats::Statistic* s = cfg.stat[v].get();
    TapStats t;
    if (const auto* h = dynamic_cast<const stats::Histogram*>(s)) {
      t.min = h->min, t.max = h->max, t.count = h->count;
      t.histogram = h->counts;
      t.histogram_lo = h->range[0];
      t.bin_width = h->range[1];
    } else if (const auto* m = dynamic_cast<const stats::MinMax*>(s)) {
      t.min = m->min, t.max = m->max, t.count = m->count;
      if (const auto* pc = dynamic_cast<const stats::PerChannelMinMax*>(s))
        t.channel_min = pc->channel_min, t.channel_max = pc->channel_max;
    } else {
      continue;
    }
    if (t.count > 0) out[im.value_name[v]] = std::move(t);
  }
  return out;
}

void Model::reset_taps() {
  Impl& im = *impl_;
  std::vector<int> ids;
  TapFactory make;
  WatchLayout layout;
  {
    std::lock_guard<std::mutex> lk(im.tap_mu);
    for (size_t v = 0; v < im.taps_cfg->stat.size(); ++v)
      if (im.taps_cfg->stat[v]) ids.push_back(static_cast<int>(v));
    make = im.taps_cfg->make;
    layout = im.taps_cfg->layout;
  }
  im.publish_taps(ids, make, layout);
}

}  // namespace qfx::runtime
