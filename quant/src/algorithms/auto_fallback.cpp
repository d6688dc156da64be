// Automatic fallback of the most sensitive layers (see ptq_algorithms.h).
#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>

#include "layers.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/error.h"

namespace qfx::quant {
namespace {

// The metric of `out` ([N, classes] for top1) against the float output or the labels.
double metric_of(const AutoFallbackOptions& o, const at::Tensor& out, const at::Tensor& ref, const at::Tensor& labels) {
  if (o.metric == "sqnr") return detail::sqnr_db(ref, out);
  if (out.dim() != 2) throw ArgumentError("auto_fallback: metric top1 needs an [N, classes] output, the model gives rank " + std::to_string(out.dim()));
  return 100.0 * out.argmax(1).eq(labels).to(at::kDouble).mean().item<double>();
}

// The first available candidate of `o` ("int16" or "float"); notes an unavailable int16 in `notes`.
// Throws ArgumentError for an unknown candidate or when none is available.
std::string first_candidate(const AutoFallbackOptions& o, std::vector<std::string>& notes) {
  std::string move_to;
  for (const auto& c : o.candidates) {
    if (c != "float" && c != "int16")
      throw ArgumentError("auto_fallback: candidates are int16 and float, not '" + c + "'");
    if (c == "int16" && !o.int16_available) {
      notes.push_back("int16: the target does not list s16 among its activation dtypes; skipped");
      continue;
    }
    if (move_to.empty()) move_to = c;
  }
  if (move_to.empty())
    throw ArgumentError("auto_fallback: no available candidate (the target offers no s16 activations; add float)");
  return move_to;
}

// Counts the held-out samples into `r`; throws ArgumentError without samples, or for top1
// without one label per sample.
void count_held_out(const HeldOutData& held, const AutoFallbackOptions& o, AutoFallbackResult& r) {
  if (held.batches.empty()) throw ArgumentError("auto_fallback: no held-out samples");
  for (const auto& b : held.batches) r.held_out_samples += b.at(0).size(0);
  if (o.metric == "top1" && (!held.labels.defined() || held.labels.numel() != r.held_out_samples))
    throw ArgumentError("auto_fallback: metric top1 needs one label per held-out sample (" +
                                std::to_string(r.held_out_samples) + " samples, " +
                                std::to_string(held.labels.defined() ? held.labels.numel() : 0) + " labels)");
}

// The ranking samples and the float model's outputs on them and on the held-out batches.
struct FloatReference {
  std::vector<std::vector<at::Tensor>> rank_samples;
  at::Tensor held_ref, rank_ref;
};

// Takes the ranking samples and runs the float model (float weights, before AdaRound and bias
// correction, when `reference` is given); leaves `gm` fake-quantizing with observers off.
FloatReference float_reference(fx::GraphModule& gm, const NextBatch& ranking_data, const HeldOutData& held,
                               const AutoFallbackOptions& o, const FloatWeights* reference) {
  FloatReference f;
  set_quant_state(gm, QuantState::kFloat);
  f.rank_samples = detail::take_samples(ranking_data, o.ranking_samples);
  if (f.rank_samples.empty()) throw ArgumentError("auto_fallback: no calibration data for the ranking");
  {
    std::unique_ptr<detail::UseFloatWeights> fw;
    if (reference) fw = std::make_unique<detail::UseFloatWeights>(gm, *reference);
    f.held_ref = detail::run_all(gm, held.batches, "auto_fallback");
    f.rank_ref = detail::run_all(gm, f.rank_samples, "auto_fallback");
  }
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  return f;
}

// A layer in float computes with its float weight and bias (AdaRound and bias
// correction changed them for the quantized weight): its entry of `reference`.
FloatWeights float_weights_of(const FloatWeights* reference, const detail::WeightedLayer& l) {
  FloatWeights f;
  if (reference)
    if (auto it = reference->layers.find(l.path); it != reference->layers.end()) f.layers.insert(*it);
  return f;
}

// The ranking SQNR (dB) with layer `l` moved to int16 output or float weights and then put back;
// nullopt where an int16 move changes nothing (its output is not quantized).
std::optional<double> trial_db(fx::GraphModule& gm, const detail::WeightedLayer& l, bool to_int16,
                               const FloatReference& f, const FloatWeights* reference) {
  double db;
  if (to_int16) {
    auto fq = detail::output_fake_quant(gm, l.node);
    if (!fq) return std::nullopt;  // output not quantized (a float consumer): int16 changes nothing
    detail::Int16Output wide(fq);
    db = detail::sqnr_db(f.rank_ref, detail::run_all(gm, f.rank_samples, "auto_fallback"));
    wide.undo();
  } else {
    FakeQuantize* w = l.module->weight_fake_quant();
    w->enable_fake_quant(false);
    {
      detail::UseFloatWeights fw(gm, float_weights_of(reference, l));
      db = detail::sqnr_db(f.rank_ref, detail::run_all(gm, f.rank_samples, "auto_fallback"));
    }
    w->enable_fake_quant(true);
  }
  return db;
}

// Moves layer `l` for good: its output to int16, or its weight and bias to float.
void move_layer(fx::GraphModule& gm, const detail::WeightedLayer& l, bool to_int16, const FloatWeights* reference) {
  if (to_int16) {
    detail::Int16Output keep(detail::output_fake_quant(gm, l.node));
  } else {
    l.module->weight_fake_quant()->enable_fake_quant(false);
    detail::UseFloatWeights(gm, float_weights_of(reference, l)).keep();
  }
}

}  // namespace

AutoFallbackResult auto_fallback(fx::GraphModule& gm, const NextBatch& ranking_data, const HeldOutData& held,
                                 const AutoFallbackOptions& o, const FloatWeights* reference) {
  at::NoGradGuard ng;
  if (o.metric != "top1" && o.metric != "sqnr")
    throw ArgumentError("auto_fallback: metric must be top1 or sqnr, not '" + o.metric + "'");
  AutoFallbackResult r;
  r.metric = o.metric;
  const std::string move_to = first_candidate(o, r.notes);
  const bool to_int16 = move_to == "int16";
  count_held_out(held, o, r);

  const auto layers = detail::weighted_layers(gm);
  const FloatReference f = float_reference(gm, ranking_data, held, o, reference);
  auto measure = [&] { return metric_of(o, detail::run_all(gm, held.batches, "auto_fallback"), f.held_ref, held.labels); };
  r.fp32 = o.metric == "top1" ? metric_of(o, f.held_ref, f.held_ref, held.labels) : std::numeric_limits<double>::infinity();
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
      const std::optional<double> db = trial_db(gm, layers[i], to_int16, f, reference);
      if (db && *db > best_db) best_db = *db, best = i;
    }
    if (best == layers.size()) break;  // nothing left to move
    moved[best] = true;
    move_layer(gm, layers[best], to_int16, reference);
    FallbackStep s{layers[best].path, move_to, best_db, measure()};
    r.reached = s.metric >= r.target;
    r.steps.push_back(s);
    if (o.progress) o.progress("decisions", k + 1, limit);
  }
  return r;
}

}  // namespace qfx::quant
