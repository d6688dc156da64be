// Prepare stage: trace, split the host post-processing off, prepare_fx, and the
// algorithms that change the float model before calibration.
#include <map>

#include "qfx/fx/tracer.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "stages.h"

namespace qfx::quant::pipeline {
namespace {

// Why cross-layer equalisation found no pair: where the outputs of the model's
// conv / linear layers go instead of straight into the next one (past their
// observers), counted by op, e.g. "aten::silu x12".
std::string no_pair_reason(fx::GraphModule& gm) {
  std::map<std::string, int> goes_to;
  int layers = 0;
  for (const fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::kCallModule || !std::dynamic_pointer_cast<FusedConvLinear>(gm.get_submodule(n->target())))
      continue;
    ++layers;
    const fx::Node* next = n;
    while (next->users().size() == 1 && next->users()[0]->op() == fx::Opcode::kCallModule &&
           std::dynamic_pointer_cast<FakeQuantize>(gm.get_submodule(next->users()[0]->target())))
      next = next->users()[0];
    if (next->users().size() != 1) {
      ++goes_to[next->users().empty() ? "the output" : "several ops"];
      continue;
    }
    const fx::Node* u = next->users()[0];
    const bool layer = u->op() == fx::Opcode::kCallModule &&
                       std::dynamic_pointer_cast<FusedConvLinear>(gm.get_submodule(u->target()));
    ++goes_to[layer ? "a layer it cannot pair with (fused ReLU6 or batch norm, other kind or channels)"
                    : (u->op() == fx::Opcode::kCallModule ? "module " + u->target() : u->target())];
  }
  if (layers == 0) return "the model has no conv or linear layer";
  std::string out;
  for (const auto& [op, count] : goes_to)
    out += (out.empty() ? "" : ", ") + op + " x" + std::to_string(count);
  return "no conv/linear is read only by the next conv/linear, directly or through a ReLU (other activations are "
         "not scale-equivariant); the outputs of the " + std::to_string(layers) + " layers go to: " + out;
}

// ptq.awq on the prepared model: the search, a summary line, skipped layers as warnings.
void awq_stage(const Job& job, fx::GraphModule& gm, Dataset& cal, PtqAlgorithmReports* alg) {
  AwqOptions o = job.cfg.ptq.awq_options;
  o.progress = [&](const std::string& input, int64_t done, int64_t total) { progress(job.hooks, "awq (groups)", done, total, input); };
  alg->awq = awq(gm, batches(cal, job.cfg.calibration.batch_size), o);
  double before = 0, after = 0, clipped = 0;
  int scaled = 0;
  for (const AwqGroup& g : alg->awq.groups) {
    before += g.error_nearest;
    after += g.error_awq;
    clipped += g.error_clip;
    scaled += g.ratio > 0;
  }
  info(job.hooks, "AWQ: " + std::to_string(scaled) + " of " + std::to_string(alg->awq.groups.size()) +
                      " Linear groups scaled; output error of nearest rounding " + std::to_string(before) + " -> " +
                      std::to_string(after) + (o.clip ? " scaled -> " + std::to_string(clipped) + " clipped" : ""));
  for (const auto& [layer, why] : alg->awq.skipped) info(job.hooks, "warning: AWQ skipped " + layer + ": " + why);
}

}  // namespace

PreparedModel prepare_stage(const Job& job, const QConfigMapping& qc, Dataset& cal, bool say_warnings,
                            PtqAlgorithmReports* alg) {
  const JobConfig& cfg = job.cfg;
  PreparedModel p;
  p.gm = fx::trace_file(cfg.model.path, cfg.tracer.options);
  p.traced_nodes = p.gm->graph().size();
  std::shared_ptr<fx::GraphModule> traced = p.gm->copy();
  p.host = split_host_postprocess(*p.gm);  // wrapped post-processing stays on the host, in float
  if (!p.host.empty()) p.traced = traced;
  if (cfg.evaluation.metric == "detection" && p.host.empty())
    throw ConfigError(job.config() + ": evaluation.metric detection compares the boxes a detector's post-processing finds, "
                      "and " + cfg.model.path + " has none left to the host: wrap the post-processing (tracer.wrap, "
                      "e.g. [\"module_type:PostProcess\"]) so that qfx ptq splits it off");
  p.gm->eval();
  const PassReport prepared = prepare_fx(*p.gm, qc, job.backend);
  if (say_warnings)
    for (const std::string& w : prepared.warnings) info(job.hooks, "warning: " + w);
  if (cfg.ptq.cross_layer_equalization) {
    alg->cross_layer_equalization = cross_layer_equalization(*p.gm);
    const size_t n = alg->cross_layer_equalization.size();
    info(job.hooks, "cross-layer equalisation: " + std::to_string(n) + " layer pairs" +
                        (n ? std::string() : ": " + no_pair_reason(*p.gm)));
  }
  if (cfg.ptq.smoothquant) {
    alg->smoothquant = smooth_quant(*p.gm, batches(cal, cfg.calibration.batch_size), cfg.ptq.smoothquant_alpha,
                                    cfg.ptq.smoothquant_samples);
    info(job.hooks, "SmoothQuant: " + std::to_string(alg->smoothquant.size()) + " LayerNorm outputs smoothed");
  }
  if (cfg.ptq.awq) awq_stage(job, *p.gm, cal, alg);
  return p;
}

void resolve_output(Job& job, const fx::GraphModule& gm) {
  const std::string& key = job.cfg.evaluation.output_key;
  if (key.empty()) {
    job.output = job.cfg.evaluation.output;
    return;
  }
  const std::vector<std::string> keys = fx::output_keys(gm.graph());
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key) {
      job.output = static_cast<int64_t>(i);
      return;
    }
  std::string have;
  for (const auto& k : keys) have += (have.empty() ? "" : ", ") + k;
  throw ConfigError(job.config() + ": evaluation.output '" + key + "': " +
                    (keys.empty() ? std::string("the model returns no dictionary (give an output index)")
                                  : "the model's dictionary has keys " + have));
}

LowerOptions lower_options(const Job& job) {
  ExportOptions e;  // the inputs as convert_model exports them
  set_inputs(&e, job.cfg.model.inputs);
  return {job.runtime(), e.input_shapes, e.input_names, e.input_dtypes};
}

}  // namespace qfx::quant::pipeline
