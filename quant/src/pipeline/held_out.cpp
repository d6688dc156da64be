// ptq.auto_fallback's held-out samples and report entry (see held_out.h).
#include "held_out.h"

#include <numeric>

#include "qfx/error.h"

namespace qfx::quant::pipeline {

HeldOutData held_out_data(const JobConfig& cfg, int64_t calibration_size, int64_t batch_size) {
  const PtqAlgorithmsConfig& a = cfg.ptq;
  const bool own = a.auto_fallback_data.given();
  const int64_t want = a.auto_fallback_samples;
  std::unique_ptr<Dataset> d =
      own ? open_inputs(a.auto_fallback_data, cfg.model.inputs, want, -1)
          : open_inputs(cfg.calibration.data, cfg.model.inputs, calibration_size + want, cfg.calibration.seed);
  const int64_t first = own ? 0 : calibration_size;
  if (d->size() <= first)
    throw ConfigError(cfg.path + ": ptq.auto_fallback has no held-out samples: calibration.num_samples takes all " +
                      std::to_string(d->size()) + " samples of " + d->source() +
                      "; lower it, or give ptq.auto_fallback.data");
  HeldOutData h;
  for (int64_t i = first; i < d->size(); i += batch_size) {
    std::vector<int64_t> pos(static_cast<size_t>(std::min(batch_size, d->size() - i)));
    std::iota(pos.begin(), pos.end(), i);
    h.batches.push_back(d->gather_inputs(pos));
  }
  if (d->labels().defined()) h.labels = d->labels().slice(0, first, d->size());
  return h;
}

nlohmann::json auto_fallback_json(const AutoFallbackResult& r) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : r.steps)
    steps.push_back({{"layer", s.layer}, {"moved_to", s.moved_to}, {"ranking_sqnr_db", s.ranking_db}, {"metric_after", s.metric}});
  nlohmann::json j = {{"metric", r.metric}, {"held_out_samples", r.held_out_samples}, {"quantized", r.quantized},
                      {"target", r.target}, {"reached", r.reached}, {"steps", steps}, {"notes", r.notes}};
  if (r.metric == "top1") j["fp32"] = r.fp32;
  return j;
}

}  // namespace qfx::quant::pipeline
