// Automatic fallback of the most sensitive layers (see ptq_algorithms.h).
#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>

#include "layers.h"
#include "qfx/quant/fake_quantize.h"

namespace qfx::quant {
namespace {

// The metric of `out` ([N, classes] for top1) against the float output or the labels.
double metric_of(const AutoFallbackOptions& o, const at::Tensor& out, const at::Tensor& ref, const at::Tensor& labels) {
  if (o.metric == "sqnr") return detail::sqnr_db(ref, out);
  if (out.dim() != 2) throw std::invalid_argument("auto_fallback: metric top1 needs an [N, classes] output, the model gives rank " + std::to_string(out.dim()));
  return 100.0 * out.argmax(1).eq(labels).to(at::kDouble).mean().item<double>();
}

}  // namespace

AutoFallbackResult auto_fallback(fx::GraphModule& gm, const NextBatch& ranking_data, const HeldOutData& held,
                                 const AutoFallbackOptions& o, const FloatWeights* reference) {
  at::NoGradGuard ng;
  if (o.metric != "top1" && o.metric != "sqnr")
    throw std::invalid_argument("auto_fallback: metric must be top1 or sqnr, not '" + o.metric + "'");
  AutoFallbackResult r;
  r.metric = o.metric;
  bool to_float = false;
  for (const auto& c : o.candidates) {
    if (c == "float") to_float = true;
    else if (c == "int16") r.notes.push_back("int16: no qfx target offers 16-bit activations yet; skipped");
    else throw std::invalid_argument("auto_fallback: candidates are int16 and float, not '" + c + "'");
  }
  if (!to_float) throw std::invalid_argument("auto_fallback: no available candidate (int16 is not offered by any qfx target yet; add float)");
  if (held.batches.empty()) throw std::invalid_argument("auto_fallback: no held-out samples");
  for (const auto& b : held.batches) r.held_out_samples += b.at(0).size(0);
  if (o.metric == "top1" && (!held.labels.defined() || held.labels.numel() != r.held_out_samples))
    throw std::invalid_argument("auto_fallback: metric top1 needs one label per held-out sample (" +
                                std::to_string(r.held_out_samples) + " samples, " +
                                std::to_string(held.labels.defined() ? held.labels.numel() : 0) + " labels)");

  const auto layers = detail::weighted_layers(gm);
  // The float model's outputs: float weights (before AdaRound and bias correction) when given.
  set_quant_state(gm, QuantState::kFloat);
  const auto rank_samples = detail::take_samples(ranking_data, o.ranking_samples);
  if (rank_samples.empty()) throw std::invalid_argument("auto_fallback: no calibration data for the ranking");
  at::Tensor held_ref, rank_ref;
  {
    std::unique_ptr<detail::UseFloatWeights> fw;
    if (reference) fw = std::make_unique<detail::UseFloatWeights>(gm, *reference);
    held_ref = detail::run_all(gm, held.batches, "auto_fallback");
    rank_ref = detail::run_all(gm, rank_samples, "auto_fallback");
  }
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  // A layer in float computes with its float weight and bias (AdaRound and bias
  // correction changed them for the quantized weight): its entry of `reference`.
  auto float_weights_of = [&](const detail::WeightedLayer& l) {
    FloatWeights f;
    if (reference)
      if (auto it = reference->layers.find(l.path); it != reference->layers.end()) f.layers.insert(*it);
    return f;
  };
  auto measure = [&] { return metric_of(o, detail::run_all(gm, held.batches, "auto_fallback"), held_ref, held.labels); };
  r.fp32 = o.metric == "top1" ? metric_of(o, held_ref, held_ref, held.labels) : std::numeric_limits<double>::infinity();
  r.target = o.metric == "top1" ? r.fp32 - o.tolerance : o.min_sqnr_db;
  r.quantized = measure();
  r.reached = r.quantized >= r.target;
  if (r.reached || o.max_layers == 0) return r;

  // Greedy forward selection: each step moves the layer whose float weight gives
  // the highest output SQNR on the ranking samples, with the earlier moves in place.
  std::vector<bool> moved(layers.size(), false);
  const int64_t limit = std::min<int64_t>(o.max_layers, static_cast<int64_t>(layers.size()));
  for (int64_t k = 0; k < limit && !r.reached; ++k) {
    double best_db = -std::numeric_limits<double>::infinity();
    size_t best = layers.size();
    for (size_t i = 0; i < layers.size(); ++i) {
      if (moved[i]) continue;
      FakeQuantize* w = layers[i].module->weight_fake_quant();
      w->enable_fake_quant(false);
      double db;
      {
        detail::UseFloatWeights fw(gm, float_weights_of(layers[i]));
        db = detail::sqnr_db(rank_ref, detail::run_all(gm, rank_samples, "auto_fallback"));
      }
      w->enable_fake_quant(true);
      if (db > best_db) best_db = db, best = i;
    }
    moved[best] = true;
    layers[best].module->weight_fake_quant()->enable_fake_quant(false);
    detail::UseFloatWeights(gm, float_weights_of(layers[best])).keep();
    FallbackStep s{layers[best].path, "float", best_db, measure()};
    r.reached = s.metric >= r.target;
    r.steps.push_back(s);
    if (o.progress) o.progress("decisions", k + 1, limit);
  }
  return r;
}

}  // namespace qfx::quant
