// report.json of a PTQ run, written from its PtqResult.
#include <algorithm>
#include <cmath>

#include "held_out.h"
#include "qfx/quant/evaluation_view.h"
#include "stages.h"

namespace qfx::quant::pipeline {
namespace {
using nlohmann::json;

json layers_json(const std::vector<LayerAlgorithmReport>& rs) {
  json j = json::array();
  for (const auto& r : rs) {
    j.push_back({{"layer", r.layer}, {"sqnr_before_db", r.sqnr_before_db}, {"sqnr_after_db", r.sqnr_after_db}, {"seconds", r.seconds}});
    if (!r.kept.empty()) j.back()["kept"] = r.kept;
  }
  return j;
}

// Layers an algorithm left as they were: [{layer, reason}].
json skipped_json(const std::vector<std::pair<std::string, std::string>>& skipped) {
  json out = json::array();
  for (const auto& [layer, why] : skipped) out.push_back({{"layer", layer}, {"reason", why}});
  return out;
}

json gptq_json(const GptqResult& g) {
  json layers = json::array();
  for (const auto& l : g.layers)
    layers.push_back({{"layer", l.layer}, {"error_nearest", l.error_nearest}, {"error_gptq", l.error_gptq}, {"rows", l.rows},
                      {"dead_inputs", l.dead_inputs}, {"seconds", l.seconds}});
  return {{"metric", "relative layer-output proxy tr((W - Q) H (W - Q)^T) / tr(W H W^T), H = 2/n sum x x^T over the "
                     "calibration inputs; nearest: round to nearest on the observed qparams"},
          {"layers", layers}, {"skipped", skipped_json(g.skipped)}};
}

json awq_json(const AwqResult& r) {
  json groups = json::array();
  for (const auto& g : r.groups)
    groups.push_back({{"input", g.input}, {"linears", g.linears}, {"ratio", g.ratio}, {"error_nearest", g.error_nearest},
                      {"error_awq", g.error_awq}, {"error_clip", g.error_clip}, {"applied", g.applied}});
  return {{"metric", "sum over a group's linears of the mean squared output error of nearest rounding on the "
                     "calibration inputs, without scaling, at the chosen ratio, and after the clipping search"},
          {"groups", groups}, {"skipped", skipped_json(r.skipped)}};
}

json algorithms_json(const PtqAlgorithmReports& a, const PtqAlgorithmsConfig& c) {
  json out = json::object();
  if (c.cross_layer_equalization) {
    json j = json::array();
    for (const auto& p : a.cross_layer_equalization)
      j.push_back({{"first", p.first}, {"second", p.second}, {"spread_first_before", p.spread_first_before},
                   {"spread_first_after", p.spread_first_after}, {"spread_second_before", p.spread_second_before},
                   {"spread_second_after", p.spread_second_after}});
    out["cross_layer_equalization"] = j;
  }
  if (c.smoothquant) {
    json j = json::array();
    for (const auto& s : a.smoothquant)
      j.push_back({{"norm", s.norm}, {"linears", s.linears}, {"spread_before", s.spread_before}, {"spread_after", s.spread_after}});
    out["smoothquant"] = j;
  }
  if (c.awq) out["awq"] = awq_json(a.awq);
  if (c.range_search) {
    const RangeSearchResult& r = a.range_search;
    json cands = json::array();
    for (const auto& k : r.candidates) cands.push_back({{"algorithm", k.algorithm}, {"sqnr_db", k.sqnr_db}});
    out["range_search"] = {{"metric", "output SQNR (dB) against fp32 on calibration samples, fake-quantized in libtorch"},
                           {"configured", r.configured}, {"chosen", r.chosen}, {"samples", r.samples},
                           {"sqnr_db", r.sqnr_db}, {"per_tensor_changes", r.per_tensor_changes},
                           {"activations", r.tensors}, {"candidates", cands}};
  }
  if (c.adaround) out["adaround"] = layers_json(a.adaround);
  if (c.gptq) out["gptq"] = gptq_json(a.gptq);
  if (c.bias_correction) out["bias_correction"] = layers_json(a.bias_correction);
  return out;
}

json sensitivity_json(const PtqAlgorithmReports& a) {
  json layers = json::array();
  for (const auto& s : a.sensitivity)
    layers.push_back({{"layer", s.layer}, {"only_this_db", s.only_this_db}, {"all_but_this_db", s.all_but_this_db}});
  return {{"metric", "output SQNR (dB) against fp32 on calibration samples, fake-quantized in libtorch"},
          {"samples", a.sensitivity_samples}, {"all_quantized_db", a.sensitivity_all_db}, {"layers", layers}};
}

json fallback_json(const PtqAlgorithmReports& a) {
  json j = auto_fallback_json(a.auto_fallback);
  j["config"] = a.auto_fallback_config;
  j["deployed"] = a.auto_fallback.metric == "top1" ? json{{"fp32", a.deployed_fp32}, {"int8", a.deployed_int8}}
                                                    : json{{"sqnr_db", a.deployed_sqnr_db}};
  return j;
}

json mixed_precision_json(const PtqAlgorithmReports& a) {
  const MixedPrecisionResult& r = a.mixed_precision;
  json layers = json::array(), front = json::array(), uniform = json::object();
  for (const auto& l : r.layers)
    layers.push_back({{"layer", l.layer}, {"chosen", l.chosen}, {"weights", l.weights}, {"macs", l.macs},
                      {"sqnr_db_only_this", l.sqnr_db}, {"weight_bytes", l.bytes}});
  for (const auto& p : r.front)
    front.push_back({{"weight_bytes", p.weight_bytes}, {"latency", p.latency}, {"estimated_sqnr_db", p.estimated_sqnr_db}});
  for (const auto& [name, u] : r.uniform) uniform[name] = {{"sqnr_db", u.first}, {"weight_bytes", u.second}};
  return {{"metric", "output SQNR (dB) against fp32 on calibration samples, fake-quantized in libtorch"},
          {"weight_bytes", r.weight_bytes}, {"weight_bytes_budget", r.weight_bytes_budget},
          {"effective_bits", r.effective_bits}, {"latency", r.latency}, {"latency_budget", r.latency_budget},
          {"reached", r.reached}, {"estimated_sqnr_db", r.estimated_sqnr_db}, {"measured_sqnr_db", r.measured_sqnr_db},
          {"uniform", uniform}, {"front", front}, {"layers", layers}, {"notes", r.notes}, {"config", a.mixed_precision_config}};
}

json calibration_json(const PtqResult& r) {
  const CalibrationResult& c = r.calibration;
  json j = {{"images", c.images}, {"images_per_s", r.calibration_images_per_s}, {"engine", c.engine}, {"threads", c.threads},
            {"processes", r.world_size}, {"seconds", c.seconds}, {"observed_tensors", c.observed_tensors}};
  if (!c.fallback_reason.empty()) j["fallback_reason"] = c.fallback_reason;
  return j;
}

json profile_json(const PtqEvaluation& E) {
  auto nodes = E.profile_int8;
  std::stable_sort(nodes.begin(), nodes.end(), [](const runtime::NodeTime& a, const runtime::NodeTime& b) { return a.ms > b.ms; });
  json a = json::array();
  const double per = 1.0 / static_cast<double>(std::max<int64_t>(E.images, 1));
  for (const auto& t : nodes) a.push_back({{"node", t.node}, {"op", t.op}, {"impl", t.impl}, {"ms_per_image", t.ms * per}});
  return {{"images", E.images}, {"nodes", a}};
}

json layer_sqnr_json(const PtqEvaluation& E) {
  json jl = json::array();
  for (const auto& l : E.layers) {
    json j = {{"node", l.node}, {"sqnr_db_fakequant", l.sqnr_db_fakequant}};
    if (l.has_int8) j["sqnr_db_int8"] = l.sqnr_db_int8;
    if (l.has_own) {
      j["sqnr_db_own"] = l.sqnr_db_own;
      j["sqnr_db_inherited"] = std::isfinite(l.sqnr_db_inherited) ? json(l.sqnr_db_inherited) : json(nullptr);  // null: nothing inherited
    }
    if (!l.value.empty()) j["value"] = l.value;
    jl.push_back(j);
  }
  return {{"images", E.sqnr_images}, {"layers", jl}};
}

json arithmetic_json(const PtqEvaluation& E) {
  json jl = json::array();
  for (const auto& d : E.arithmetic_layers)
    jl.push_back({{"node", d.node}, {"codes", d.codes}, {"differing", d.differing}, {"max_abs_diff", d.max_abs_diff}});
  json j = {{"arithmetic", json::parse(E.arithmetic)}, {"images", E.arithmetic_images}, {"layers_vs_float_requantization", jl}};
  if (E.has_top1_float_requant) j["top1_float_requantization"] = E.top1_float_requant;
  return j;
}

}  // namespace

json ptq_report_json(const PtqResult& r, const PtqAlgorithmsConfig& algorithms) {
  json report;
  report["versions"] = versions_json();
  report["model"] = r.model;
  report["config"] = r.config;
  report["backend"] = r.backend;
  report["runtime_backend"] = r.runtime_backend;
  report["algorithms"] = algorithms_json(r.algorithms, algorithms);
  report["traced_nodes"] = r.traced_nodes;
  if (!r.host_postprocess.empty())
    report["host_postprocess"] = {{"nodes", r.host_postprocess.host_nodes}, {"model_outputs", r.host_postprocess.outputs}};
  if (r.algorithms.has_sensitivity) report["sensitivity"] = sensitivity_json(r.algorithms);
  if (r.algorithms.has_auto_fallback) report["auto_fallback"] = fallback_json(r.algorithms);
  if (r.algorithms.has_mixed_precision) report["mixed_precision"] = mixed_precision_json(r.algorithms);
  report["calibration"] = calibration_json(r);
  report["float_fallbacks"] = r.float_fallbacks;
  report["runtime_float_groups"] = r.runtime_float_groups;
  report["export_float_ops"] = r.export_float_ops;
  report["kernels"] = kernel_report_json(r.kernel_report);
  if (r.evaluated) {
    const PtqEvaluation& E = r.evaluation;
    report["evaluation"] = evaluation_report_json(evaluation_view(E, r.runtime_backend));
    report["profile_int8"] = profile_json(E);
    if (E.sqnr_images > 0) report["per_layer_sqnr"] = layer_sqnr_json(E);
    if (!E.arithmetic.empty()) report["target_arithmetic"] = arithmetic_json(E);
  }
  report["outputs"] = r.outputs;
  return report;
}

}  // namespace qfx::quant::pipeline
