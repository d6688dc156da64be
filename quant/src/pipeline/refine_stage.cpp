// Refine stage: per-layer sensitivity, AdaRound, GPTQ and bias correction on the
// calibrated model (libtorch, fake quantization).
#include <algorithm>
#include <string>

#include "stages.h"

namespace qfx::quant::pipeline {
namespace {
std::string db(double v) { return std::to_string(v).substr(0, 5); }
}  // namespace

void check_range_search(const Job& job, fx::GraphModule& gm) {
  if (job.cfg.ptq.range_search && count_histogram_activations(gm) == 0)
    throw ConfigError(job.config() + ": ptq.range_search chooses among histogram algorithms, but no activation is observed "
                      "by a histogram observer (set qconfig ... activation: {observer: histogram})");
}

void range_search_stage(const Job& job, fx::GraphModule& gm, Dataset& cal, PtqAlgorithmReports* alg) {
  const auto t0 = Clock::now();
  alg->has_range_search = true;
  alg->range_search = range_search(gm, batches(cal, job.cfg.calibration.batch_size), job.cfg.ptq.range_search_options);
  const RangeSearchResult& r = alg->range_search;
  std::string line;
  for (const auto& c : r.candidates) line += (line.empty() ? "" : ", ") + c.algorithm + " " + db(c.sqnr_db) + " dB";
  info(job.hooks, "range_search: output SQNR on " + std::to_string(r.samples) + " calibration samples: " + line + "; chosen " +
                      r.chosen + " for " + std::to_string(r.tensors) + " activations" +
                      (job.cfg.ptq.range_search_options.per_tensor
                           ? ", then " + std::to_string(r.per_tensor_changes) + " set per tensor: " + db(r.sqnr_db) + " dB"
                           : "") +
                      " (" + std::to_string(static_cast<int>(secs(t0))) + " s)");
}

void sensitivity_stage(const Job& job, fx::GraphModule& gm, Dataset& cal, PtqAlgorithmReports* alg) {
  const PtqAlgorithmsConfig& c = job.cfg.ptq;
  alg->has_sensitivity = true;
  alg->sensitivity_samples = c.sensitivity_samples;
  alg->sensitivity = layer_sensitivity(gm, batches(cal, job.cfg.calibration.batch_size), c.sensitivity_samples,
                                       &alg->sensitivity_all_db);
  const auto& s = alg->sensitivity;
  for (size_t i = 0; i < std::min<size_t>(3, s.size()); ++i)
    info(job.hooks, "sensitivity #" + std::to_string(i + 1) + ": " + s[i].layer + " (only it quantized: " + db(s[i].only_this_db) +
                        " dB; all but it: " + db(s[i].all_but_this_db) + " dB; all: " + db(alg->sensitivity_all_db) + " dB)");
}

void gptq_stage(const Job& job, fx::GraphModule& gm, Dataset& cal, PtqAlgorithmReports* alg) {
  GptqOptions o = job.cfg.ptq.gptq_options;
  o.progress = [&](const std::string& layer, int64_t done, int64_t total) { progress(job.hooks, "gptq (layers)", done, total, layer); };
  const auto t0 = Clock::now();
  alg->gptq = gptq(gm, batches(cal, job.cfg.calibration.batch_size), o);
  double nearest = 0, after = 0;
  for (const auto& l : alg->gptq.layers) {
    nearest += l.error_nearest;
    after += l.error_gptq;
  }
  const double n = static_cast<double>(std::max<size_t>(alg->gptq.layers.size(), 1));
  std::string skipped;
  if (!alg->gptq.skipped.empty())
    skipped = "; " + std::to_string(alg->gptq.skipped.size()) + " skipped (" + alg->gptq.skipped.front().first + ": " +
              alg->gptq.skipped.front().second + (alg->gptq.skipped.size() > 1 ? ", ..." : "") + ")";
  info(job.hooks, "gptq: " + std::to_string(alg->gptq.layers.size()) + " layers in " + std::to_string(static_cast<int>(secs(t0))) +
                      " s; mean relative weight error (tr(dW H dW^T) / tr(W H W^T)) nearest " + std::to_string(nearest / n) +
                      " -> gptq " + std::to_string(after / n) + skipped);
}

FloatWeights refine_stage(const Job& job, fx::GraphModule& gm, Dataset& cal, PtqAlgorithmReports* alg) {
  const PtqAlgorithmsConfig& c = job.cfg.ptq;
  const int64_t bs = job.cfg.calibration.batch_size;
  FloatWeights reference;
  if (!c.adaround && !c.gptq && !c.bias_correction) return reference;
  reference = snapshot_float_weights(gm);
  if (c.gptq) gptq_stage(job, gm, cal, alg);
  if (c.adaround) {
    AdaRoundOptions o = c.adaround_options;
    o.progress = [&](const std::string& layer, int64_t done, int64_t total) {
      progress(job.hooks, "adaround (layers)", done, total, layer);
    };
    const auto t0 = Clock::now();
    alg->adaround = adaround(gm, batches(cal, bs), o, &reference);
    info(job.hooks, "adaround: " + std::to_string(alg->adaround.size()) + " layers in " +
                        std::to_string(static_cast<int>(secs(t0))) + " s");
  }
  if (c.bias_correction) alg->bias_correction = bias_correction(gm, batches(cal, bs), c.bias_correction_samples, &reference);
  return reference;
}

}  // namespace qfx::quant::pipeline
