// report.json of a QAT run, written from its QatResult.
#include "stages.h"

namespace qfx::quant::pipeline {

nlohmann::json qat_report_json(const QatResult& r, const TrainingConfig& tc) {
  using nlohmann::json;
  json report;
  report["versions"] = versions_json();
  report["model"] = r.model;
  report["config"] = r.config;
  report["backend"] = r.backend;
  json curve = json::array();
  for (const auto& p : r.curve)
    curve.push_back({{"step", p.step}, {"epoch", p.epoch}, {"loss", p.loss}, {"train_accuracy", p.train_accuracy}});
  if (!curve.empty()) curve.back()["top1_fakequant"] = r.top1_fakequant;  // evaluated once, after training
  report["training"] = {{"steps", r.steps}, {"epochs", tc.epochs}, {"batch_size", tc.batch_size}, {"processes", r.world_size},
                        {"device", tc.device}, {"optimizer", tc.optimizer}, {"lr", tc.lr}, {"lr_schedule", tc.lr_schedule},
                        {"final_loss_ema", r.final_loss_ema}, {"ms_per_step", r.ms_per_step}, {"checkpoint", r.checkpoint},
                        {"fwd_bwd_ms_fake_quant", r.fwd_bwd_ms_fake_quant}, {"fwd_bwd_ms_float", r.fwd_bwd_ms_float},
                        {"curve", curve}};
  if (r.world_size > 1) report["training"]["qparams_identical_on_all_ranks"] = r.qparams_identical_on_all_ranks;
  report["evaluation"] = {{"images", r.eval_images}, {"top1_fp32", r.top1_fp32}, {"top1_fakequant", r.top1_fakequant},
                          {"top1_int8", r.top1_int8}, {"int8_agrees_with_fakequant", r.int8_agrees_with_fakequant}};
  if (r.reference_images > 0)
    report["evaluation"]["reference_check"] = {{"images", r.reference_images}, {"identical_outputs", r.reference_identical},
                                               {"max_abs_diff", r.reference_max_abs_diff},
                                               {"exact_expected", r.reference_exact_expected}};
  report["float_fallbacks"] = r.float_fallbacks;
  report["runtime_float_groups"] = r.runtime_float_groups;
  report["kernels"] = kernel_report_json(r.kernel_report);
  report["outputs"] = r.outputs;
  return report;
}

}  // namespace qfx::quant::pipeline
