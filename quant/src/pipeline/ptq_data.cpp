// The PTQ job's data, opened and checked before any long work.
#include <algorithm>

#include "held_out.h"
#include "stages.h"
#include "world_check.h"

namespace qfx::quant::pipeline {

void check_model_file(const Job& job) {
  if (!fs::exists(job.cfg.model.path))
    throw IoError(job.cfg.model.path + ": model file not found (model.path in " + job.config() + ")");
}

PtqData open_ptq_data(const Job& job, int world) {
  const JobConfig& cfg = job.cfg;
  PtqData d;
  d.cal = open_inputs(cfg.calibration.data, cfg.model.inputs, cfg.calibration.num_samples, cfg.calibration.seed);
  note_fewer_samples(job.hooks, "calibration.num_samples", cfg.calibration.num_samples, d.cal->size());
  if (cfg.evaluation.enabled) {
    d.ev = open_inputs(cfg.evaluation.data, cfg.model.inputs, cfg.evaluation.num_samples, -1);
    note_fewer_samples(job.hooks, "evaluation.num_samples", cfg.evaluation.num_samples, d.ev->size());
    if (cfg.evaluation.metric == "top1" && !d.ev->labels().defined())
      throw ConfigError(job.config() + ": evaluation.metric top1 needs labels (evaluation.data.labels)");
    if (cfg.evaluation.metric == "top1" && d.ev->labels().dim() != 1)
      throw DataError(cfg.evaluation.data.labels + ": evaluation.metric top1 needs one class per sample [N]; these labels "
                      "are per pixel (rank " + std::to_string(d.ev->labels().dim()) + "): use evaluation.metric miou");
  }
  const auto& s16 = job.backend.activation.dtypes;
  d.int16_available = std::find(s16.begin(), s16.end(), QDType::kInt16) != s16.end();
  if (cfg.ptq.auto_fallback) {  // read before the long work: its errors come first
    const auto& cands = cfg.ptq.auto_fallback_options.candidates;
    if (!d.int16_available && std::find(cands.begin(), cands.end(), "float") == cands.end())
      throw ConfigError(job.config() + ": ptq.auto_fallback.candidates: backend '" + job.backend.name +
                        "' offers no s16 activations (activation.dtypes); add float");
    d.held = held_out_data(cfg, d.cal->size(), cfg.evaluation.batch_size);
  }
  check_calibration_world(cfg, d.cal->size(), world);  // data-parallel: every rank calibrates its shard
  return d;
}

}  // namespace qfx::quant::pipeline
