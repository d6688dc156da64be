// Mixed precision stage: the search, its summary, and the config that reproduces it.
#include <cstdio>

#include "stages.h"

namespace qfx::quant::pipeline {
namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string mb(int64_t bytes) { return fmt("%.3f MB", static_cast<double>(bytes) / 1e6); }

// The module_name entries config_final.yaml gets: each layer's matched entry with what
// candidate_qconfig changed in the qconfig it resolved to (the mapping the model is prepared with).
std::vector<ModuleQConfigEdit> edits_of(const Job& job, const MixedPrecisionResult& r) {
  std::vector<ModuleQConfigEdit> out;
  const MixedPrecisionOptions& o = job.cfg.ptq.mixed_precision_options;
  for (const auto& l : r.layers) {
    ModuleQConfigEdit e;
    e.module = l.layer;
    e.matched_by = l.matched_by;
    const QConfigPtr base = job.cfg.qconfig.resolve(l.layer, l.object_type);
    const QConfigPtr q = base ? candidate_qconfig(*base, PrecisionCandidate::parse(l.chosen, "mixed_precision"),
                                                  o.block_size, l.linear)
                              : nullptr;
    e.keep_float = !q;
    if (q) {
      e.weight_bits = q->weight.bits.value_or(0);
      if (q->weight.block_size) e.weight_block_size = *q->weight.block_size;
      else if (base->weight.block_size) e.weight_block_size = 0;
      if (q->activation.dtype != base->activation.dtype || q->activation.bits != base->activation.bits)
        e.activation_dtype = qdtype_name(*q->activation.dtype);  // s16, its bits implied
    }
    out.push_back(e);
  }
  return out;
}

void summarize(const Job& job, const MixedPrecisionResult& r) {
  std::map<std::string, int> count;
  for (const auto& l : r.layers) ++count[l.chosen];
  std::string chosen;
  for (const auto& [name, n] : count) chosen += (chosen.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  info(job.hooks, "mixed_precision: " + std::to_string(r.layers.size()) + " layers: " + chosen);
  info(job.hooks, "mixed_precision: weights " + mb(r.weight_bytes) + fmt(" (%.2f bits per weight)", r.effective_bits) +
                      (r.weight_bytes_budget > 0 ? ", budget " + mb(r.weight_bytes_budget) : "") +
                      (r.latency_budget > 0 ? fmt(", latency %.3f", r.latency) + fmt(" (budget %.3f)", r.latency_budget) : "") +
                      (r.reached ? "" : ": budget NOT reached (no candidate lowers it further)"));
  info(job.hooks, "mixed_precision: output SQNR estimated " + fmt("%.2f dB", r.estimated_sqnr_db) + ", measured " +
                      fmt("%.2f dB", r.measured_sqnr_db));
  for (const auto& [name, u] : r.uniform)
    info(job.hooks, "mixed_precision: every layer " + name + ": " + fmt("%.2f dB", u.first) + ", " + mb(u.second));
  for (const auto& n : r.notes) info(job.hooks, "mixed_precision: " + n);
}

}  // namespace

QConfigMapping mixed_stage(const Job& job, fx::GraphModule& gm, Dataset& cal, const Staging& out, PtqAlgorithmReports* alg) {
  MixedPrecisionOptions o = job.cfg.ptq.mixed_precision_options;
  for (const auto& [name, cost] : job.backend.mac_cost) o.mac_cost.emplace(name, cost);
  o.progress = [&](const std::string& stage, int64_t done, int64_t total) {
    progress(job.hooks, "mixed_precision " + stage + " (layers)", done, total);
  };
  alg->has_mixed_precision = true;
  alg->mixed_precision = mixed_precision(gm, job.cfg.qconfig, job.backend, batches(cal, job.cfg.calibration.batch_size), o);
  summarize(job, alg->mixed_precision);
  write_file_atomic(out.path("config_final.yaml"),
                    final_config_yaml(job.cfg, edits_of(job, alg->mixed_precision),
                                      "written by qfx ptq (ptq.mixed_precision) from " + job.config() +
                                          "\nrun it again: qfx ptq " + out.final_path("config_final.yaml")));
  alg->mixed_precision_config = out.final_path("config_final.yaml");
  return with_mixed_precision(job.cfg.qconfig, alg->mixed_precision, o);
}

}  // namespace qfx::quant::pipeline
