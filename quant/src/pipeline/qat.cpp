// quant::qat: the QAT pipeline as a composition of its stages (stages.h).
#include "qfx/fx/tracer.h"
#include "qfx/quant/distributed.h"
#include "qfx/quant/fake_quantize.h"
#include "metrics.h"
#include "stages.h"

namespace qfx::quant {
using namespace pipeline;
namespace {

// Optional: the observers start from a calibration pass over the float graph (runtime).
void calibrate_observers(const Job& job, fx::GraphModule& gm, distributed::Context* dist, int rank, int world) {
  const JobConfig& cfg = job.cfg;
  auto cal = open_inputs(cfg.calibration.data, cfg.model.inputs, cfg.calibration.num_samples, cfg.calibration.seed);
  CalibrateOptions co;  // a graph the runtime cannot run calibrates in libtorch
  co.backend = job.runtime();
  co.input_shapes = {cfg.model.input_shape};
  co.distributed = world > 1 ? dist : nullptr;
  co.device = cfg.calibration.device;
  calibrate(gm, batches(*cal, cfg.calibration.batch_size, rank, world), co);
}

// Convert, run the int8 model on the runtime, check it on the reference backend, write.
void deploy(const Job& job, fx::GraphModule& gm, Dataset& ev, const at::Tensor& fq_pred, Staging& out, QatResult* r,
            Clock::time_point t_start) {
  Int8Model int8 = convert_stage(job, gm, out, r);
  const at::Tensor q = run_int8(job, int8, ev);
  const ReferenceCheck c = reference_check(job, int8, ev, q);
  r->reference_images = c.images;
  r->reference_identical = c.identical;
  r->reference_max_abs_diff = c.max_abs_diff;
  r->reference_exact_expected = c.exact_expected;
  r->reference_float_ops = c.float_ops;
  r->top1_int8 = label_accuracy(q.argmax(1), ev.labels(), q.size(1), job.cfg.evaluation.data.labels);
  r->int8_agrees_with_fakequant = q.argmax(1).eq(fq_pred).to(at::kDouble).mean().item<double>();
  write_encodings(out.path("encodings.json"), int8.exported, graph_hash(gm), job.backend.name, &int8.model);
  r->outputs = {out.final_path("model_int8.onnx"), out.final_path("encodings.json"), out.final_path("report.json")};
  if (job.cfg.output.tflite) r->outputs.push_back(out.final_path("model_int8.tflite"));
  if (job.cfg.output.aimet)
    for (const char* f : {"model_aimet.onnx", "model_aimet.encodings"}) r->outputs.push_back(out.final_path(f));
  if (job.cfg.output.report_html) r->outputs.push_back(out.final_path("report.html"));
  nlohmann::json report = qat_report_json(*r, job.cfg.training);
  write_reports(out, report, gm, job.cfg.output.report_html, secs(t_start), job.hooks);
  out.commit();
}

}  // namespace

QatResult qat(const JobConfig& cfg, const PipelineHooks& hooks_in, distributed::Context* dist) {
  const auto t_start = Clock::now();
  QatResult res;
  res.rank = dist ? dist->rank() : 0;
  res.world_size = dist && dist->active() ? dist->world_size() : 1;
  const PipelineHooks hooks = res.rank == 0 ? hooks_in : PipelineHooks{};  // the other ranks work silently
  if (!cfg.training.enabled) throw ConfigError(cfg.path + ": 'training' is required for qfx qat");
  if (res.world_size > 1 && cfg.training.device != "cpu")
    throw ConfigError(cfg.path + ": training.device: " + cfg.training.device + " trains in one process; data-parallel QAT (" +
                      std::to_string(res.world_size) + " processes) trains on the CPU");
  const BackendConfig backend = BackendConfig::resolve(cfg.backend);
  Job job{cfg, backend, hooks};
  check_model_file(job);
  if (!cfg.evaluation.enabled) throw ConfigError(cfg.path + ": qfx qat needs an 'evaluation' section with labels");
  set_inputs(&res, cfg, backend.name, job.runtime());
  info(hooks, "qfx qat: " + cfg.model.path + " on backend '" + backend.name + "' (runtime " + job.runtime() + ", config " + cfg.path + ")");
  auto train = open_inputs(cfg.training.data, cfg.model.inputs, cfg.training.num_samples, -1);
  note_fewer_samples(hooks, "training.num_samples", cfg.training.num_samples, train->size());
  auto ev = open_inputs(cfg.evaluation.data, cfg.model.inputs, cfg.evaluation.num_samples, -1);
  note_fewer_samples(hooks, "evaluation.num_samples", cfg.evaluation.num_samples, ev->size());
  if (!ev->labels().defined()) throw ConfigError(cfg.path + ": evaluation.data.labels is required for qfx qat");
  std::optional<Staging> out;
  if (res.rank == 0) open_output(&out, cfg.output.dir, hooks);
  res.checkpoint = cfg.training.checkpoint.empty() ? (fs::path(cfg.output.dir) / "qat_checkpoint.pt").string() : cfg.training.checkpoint;

  torch::manual_seed(static_cast<uint64_t>(cfg.training.seed));
  auto gm = fx::trace_file(cfg.model.path, cfg.tracer.options);
  gm->eval();
  resolve_output(job, *gm);
  at::Tensor pred;
  if (res.rank == 0) res.top1_fp32 = top1_libtorch(job, *gm, *ev, &pred, "fp32 evaluation");
  for (const std::string& w : prepare_qat_fx(*gm, cfg.qconfig, backend).warnings) info(hooks, "warning: " + w);
  if (cfg.calibration.enabled) calibrate_observers(job, *gm, dist, res.rank, res.world_size);
  train_stage(job, *gm, *train, dist, res.checkpoint, &res);
  if (res.world_size > 1) {
    distributed::synchronize_observers(*gm, *dist, false);
    res.qparams_identical_on_all_ranks = qparams_identical_on_all_ranks(*gm, *dist);  // rank 0 checks; the others are done
    if (res.rank != 0) {
      res.seconds = secs(t_start);
      return res;
    }
  }
  fake_quant_cost_stage(job, *gm, *train, &res);
  gm->eval();
  set_quant_state(*gm, QuantState::kFakeQuant);
  disable_observer(*gm);
  res.top1_fakequant = top1_libtorch(job, *gm, *ev, &pred, "fake-quant evaluation");
  res.eval_images = ev->size();
  deploy(job, *gm, *ev, pred, *out, &res, t_start);
  res.seconds = secs(t_start);
  return res;
}

}  // namespace qfx::quant
