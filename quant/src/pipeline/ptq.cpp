// quant::ptq: the PTQ pipeline as a composition of its stages (stages.h).
#include "arithmetic_report.h"
#include "qfx/quant/distributed.h"
#include "stages.h"

namespace qfx::quant {
using namespace pipeline;
namespace {

void set_calibration(PtqResult* r, const CalibrationResult& c) {
  r->calibration = c;
  r->calibration_images_per_s = static_cast<double>(c.images) / std::max(c.seconds, 1e-9);
}

// Evaluation, per-layer SQNR, the target arithmetic's differences and the
// reference check, all on the evaluation data (into r.evaluation).
void evaluate_all(const Job& job, const LoweredModel& fp32, Int8Model& int8, Dataset& ev, const at::Tensor& libtorch_first,
                  const PreparedModel& p, PtqResult* r) {
  PtqEvaluation& E = r->evaluation;
  r->evaluated = true;
  const at::Tensor q = evaluate_stage(job, fp32.model(), int8.model, int8.output, ev, libtorch_first, p, &E);
  layer_sqnr_stage(job, fp32, int8, ev, &E);
  if (!job.backend.arithmetic.is_float()) {
    info(job.hooks, "target arithmetic: " + job.backend.arithmetic.describe());
    detail::compare_arithmetic(int8.model, int8.parsed, job.runtime(), int8.exported, ev,
                               std::max<int64_t>(job.cfg.evaluation.sqnr_samples, 1), job.cfg.evaluation.batch_size,
                               int8.output, job.cfg.evaluation.metric == "top1", E);
  }
  const ReferenceCheck c = reference_check(job, int8, ev, q);
  E.reference_images = c.images;
  E.reference_identical = c.identical;
  E.reference_max_abs_diff = c.max_abs_diff;
  E.reference_exact_expected = c.exact_expected;
  E.reference_float_ops = c.float_ops;
}

// The outputs: encodings, the float model if asked, report.json / report.html; then commit.
void write_outputs(const Job& job, PtqResult* r, const Int8Model& int8, const fx::GraphModule& gm, const LoweredModel& fp32,
                   Staging& out, Clock::time_point t_start) {
  write_encodings(out.path("encodings.json"), int8.exported, graph_hash(gm), job.backend.name, &int8.model);
  r->outputs = {out.final_path("model_int8.onnx"), out.final_path("encodings.json"), out.final_path("report.json")};
  if (job.cfg.output.tflite) r->outputs.push_back(out.final_path("model_int8.tflite"));
  if (job.cfg.output.aimet)
    for (const char* f : {"model_aimet.onnx", "model_aimet.encodings"}) r->outputs.push_back(out.final_path(f));
  if (job.cfg.output.float_model) {
    write_file_atomic(out.path("model_fp32.onnx"), fp32.onnx());
    r->outputs.push_back(out.final_path("model_fp32.onnx"));
  }
  if (job.cfg.output.report_html) r->outputs.push_back(out.final_path("report.html"));
  nlohmann::json report = ptq_report_json(*r, job.cfg.ptq);
  write_reports(out, report, gm, job.cfg.output.report_html, secs(t_start), job.hooks);
  out.commit();
}

}  // namespace

PtqResult ptq(const JobConfig& cfg, const PipelineHooks& hooks, distributed::Context* dist) {
  const auto t_start = Clock::now();
  if (!cfg.calibration.enabled) throw ConfigError(cfg.path + ": 'calibration' is required for qfx ptq");
  const BackendConfig backend = BackendConfig::resolve(cfg.backend);
  Job job{cfg, backend, hooks};
  check_model_file(job);
  PtqResult res;
  set_inputs(&res, cfg, backend.name, job.runtime());
  info(hooks, "qfx ptq: " + cfg.model.path + " on backend '" + backend.name + "' (runtime " + job.runtime() + ", config " + cfg.path + ")");
  res.rank = dist ? dist->rank() : 0;
  res.world_size = dist ? dist->world_size() : 1;
  PtqData data = open_ptq_data(job, res.world_size);
  std::optional<Staging> out;  // rank 0 alone goes on after calibration and writes the outputs
  if (res.rank == 0) open_output(&out, cfg.output.dir, hooks);
  at::NoGradGuard no_grad;

  PreparedModel p = prepare_stage(job, cfg.qconfig, *data.cal, true, &res.algorithms);
  check_range_search(job, *p.gm);
  resolve_output(job, *p.gm);
  auto lowered = std::make_unique<LoweredModel>(*p.gm, lower_options(job));
  set_calibration(&res, calibrate_stage(job, *p.gm, *lowered, *data.cal, dist));
  if (res.rank != 0) {  // a worker: its observers equal rank 0's
    res.seconds = secs(t_start);
    return res;
  }
  // Taken before the algorithms below change weights.
  const at::Tensor libtorch_first = libtorch_first_batch(job, *p.gm, data.ev.get(), lowered->model());
  if (cfg.ptq.range_search) range_search_stage(job, *p.gm, *data.cal, &res.algorithms);
  if (cfg.ptq.sensitivity) sensitivity_stage(job, *p.gm, *data.cal, &res.algorithms);
  if (cfg.ptq.mixed_precision) {  // the deployed model is the one config_final.yaml reproduces
    const QConfigMapping chosen = mixed_stage(job, *p.gm, *data.cal, *out, &res.algorithms);
    p = prepare_stage(job, chosen, *data.cal, false, &res.algorithms);
    lowered = std::make_unique<LoweredModel>(*p.gm, lower_options(job));
    set_calibration(&res, calibrate_stage(job, *p.gm, *lowered, *data.cal, nullptr));  // the other ranks have finished
    if (cfg.ptq.range_search) range_search_stage(job, *p.gm, *data.cal, &res.algorithms);
  }
  const FloatWeights reference = refine_stage(job, *p.gm, *data.cal, &res.algorithms);
  if (cfg.ptq.auto_fallback) {
    const FallbackMoves moves = fallback_stage(job, *p.gm, data, reference, &res.algorithms);
    write_final_config(job, moves, *out, &res.algorithms);
    if (!moves.empty()) {  // the deployed model is the one config_final.yaml reproduces
      p = prepare_stage(job, with_fallback(cfg.qconfig, moves), *data.cal, false, &res.algorithms);
      lowered = std::make_unique<LoweredModel>(*p.gm, lower_options(job));
      set_calibration(&res, calibrate_stage(job, *p.gm, *lowered, *data.cal, nullptr));  // the other ranks have finished
      if (cfg.ptq.range_search) range_search_stage(job, *p.gm, *data.cal, &res.algorithms);  // on the model deployed
      refine_stage(job, *p.gm, *data.cal, &res.algorithms);
    }
  }
  res.host_postprocess = p.host;
  res.traced_nodes = p.traced_nodes;

  Int8Model int8 = convert_stage(job, *p.gm, *out, &res);
  res.export_float_ops = int8.exported.float_ops;
  if (cfg.ptq.auto_fallback) fallback_deployed(job, lowered->model(), int8.model, data.held, int8.output, &res.algorithms);
  if (data.ev) evaluate_all(job, *lowered, int8, *data.ev, libtorch_first, p, &res);
  write_outputs(job, &res, int8, *p.gm, *lowered, *out, t_start);
  res.seconds = secs(t_start);
  return res;
}

}  // namespace qfx::quant
