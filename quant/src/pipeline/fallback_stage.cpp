// Automatic fallback stage: the search, the QConfigMapping it leads to, the
// config that reproduces it, and the deployed model's metric on the held-out data.
#include "../algorithms/layers.h"
#include "held_out.h"
#include "stages.h"

namespace qfx::quant::pipeline {
namespace {

std::string two_decimals(double v) {
  const std::string t = std::to_string(v);
  return t.substr(0, t.find('.') + 3);
}

std::string moved_summary(const FallbackMoves& m) {
  return std::to_string(m.to_int16.size()) + " layer(s) with int16 outputs, " + std::to_string(m.to_float.size()) + " in float";
}

}  // namespace

FallbackMoves fallback_stage(const Job& job, fx::GraphModule& gm, const PtqData& data, const FloatWeights& reference,
                             PtqAlgorithmReports* alg) {
  AutoFallbackOptions o = job.cfg.ptq.auto_fallback_options;
  o.int16_available = data.int16_available;
  o.progress = [&](const std::string& stage, int64_t done, int64_t total) {
    progress(job.hooks, "auto_fallback " + stage + " (layers)", done, total);
  };
  alg->has_auto_fallback = true;
  alg->auto_fallback = auto_fallback(gm, batches(*data.cal, job.cfg.calibration.batch_size), data.held, o,
                                     reference.layers.empty() ? nullptr : &reference);
  const AutoFallbackResult& af = alg->auto_fallback;
  const bool top1 = af.metric == "top1";
  const std::string unit = top1 ? " %" : " dB";
  info(job.hooks, "auto_fallback: " + af.metric + " on " + std::to_string(af.held_out_samples) + " held-out samples: " +
                      (top1 ? "fp32 " + two_decimals(af.fp32) + unit + ", " : "") + "quantized " + two_decimals(af.quantized) +
                      unit + ", target " + two_decimals(af.target) + unit);
  FallbackMoves moves;
  for (const auto& st : af.steps) {
    (st.moved_to == "int16" ? moves.to_int16 : moves.to_float).push_back(st.layer);
    info(job.hooks, "auto_fallback: " + st.layer + " -> " + st.moved_to + ": " + two_decimals(st.metric) + unit);
  }
  for (const auto& n : af.notes) info(job.hooks, "auto_fallback: " + n);
  info(job.hooks, std::string("auto_fallback: ") + (af.reached ? "target reached" : "target NOT reached") + " with " +
                      moved_summary(moves) + (af.reached ? "" : " (max_layers " + std::to_string(o.max_layers) + ")"));
  if (!moves.empty()) info(job.hooks, "auto_fallback: preparing again with " + moved_summary(moves));
  return moves;
}

QConfigMapping with_fallback(const QConfigMapping& qc, const FallbackMoves& moves) {
  QConfigMapping out = qc;
  for (const auto& m : moves.to_float) out.set_module_name(m, nullptr);
  for (const auto& m : moves.to_int16) {
    // The global qconfig (its observer, algorithm, scheme, weights), 16-bit outputs.
    auto wide = std::make_shared<QConfig>(*qc.global());
    wide->activation.dtype = QDType::kInt16;
    wide->activation.bits.reset();
    out.set_module_name(m, wide);
  }
  return out;
}

void write_final_config(const Job& job, const FallbackMoves& moves, const Staging& out, PtqAlgorithmReports* alg) {
  write_file_atomic(out.path("config_final.yaml"),
                    final_config_yaml(job.cfg, moves.to_float, moves.to_int16,
                                      "written by qfx ptq (ptq.auto_fallback) from " + job.config() +
                                          "\nrun it again: qfx ptq " + out.final_path("config_final.yaml")));
  alg->auto_fallback_config = out.final_path("config_final.yaml");
}

void fallback_deployed(const Job& job, const runtime::Model& fp32, const runtime::Model& int8, const HeldOutData& held,
                       const std::string& out_name, PtqAlgorithmReports* alg) {
  std::vector<at::Tensor> f, q;
  for (const auto& b : held.batches) {
    const std::map<std::string, runtime::Tensor> in = feed(fp32, b);
    f.push_back(to_aten(fp32.run(in).at(out_name)));
    q.push_back(to_aten(int8.run(in).at(out_name)));
  }
  const at::Tensor fo = at::cat(f), qo = at::cat(q);
  if (job.cfg.ptq.auto_fallback_options.metric == "top1") {
    alg->deployed_fp32 = 100.0 * fo.argmax(1).eq(held.labels).to(at::kDouble).mean().item<double>();
    alg->deployed_int8 = 100.0 * qo.argmax(1).eq(held.labels).to(at::kDouble).mean().item<double>();
  } else {
    alg->deployed_sqnr_db = detail::sqnr_db(fo, qo);
  }
}

}  // namespace qfx::quant::pipeline
