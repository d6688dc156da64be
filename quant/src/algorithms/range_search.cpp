// Output-aware choice of the activation range algorithm (see ptq_algorithms.h).
#include <ATen/ATen.h>

#include <limits>
#include <set>

#include "layers.h"
#include "qfx/error.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/observer.h"

namespace qfx::quant {
namespace {

// The activation FakeQuantizes (graph call_module nodes, not weight quantizers)
// whose observer is a HistogramObserver, each once.
std::vector<FakeQuantize*> histogram_activations(fx::GraphModule& gm) {
  std::vector<FakeQuantize*> out;
  std::set<const FakeQuantize*> seen;
  for (const fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::kCallModule) continue;
    auto* fq = dynamic_cast<FakeQuantize*>(gm.get_submodule(n->target()).get());
    if (!fq || !dynamic_cast<HistogramObserver*>(&fq->observer()) || !seen.insert(fq).second) continue;
    out.push_back(fq);
  }
  return out;
}

void set_all(const std::vector<FakeQuantize*>& fqs, Algorithm a) {
  for (FakeQuantize* fq : fqs) {
    static_cast<HistogramObserver&>(fq->observer()).set_algorithm(a);
    fq->calculate_qparams();
  }
}

std::string configured_of(const std::vector<FakeQuantize*>& fqs) {
  std::set<std::string> names;
  for (FakeQuantize* fq : fqs)
    names.insert(algorithm_name(static_cast<HistogramObserver&>(fq->observer()).configured_algorithm()));
  return names.size() == 1 ? *names.begin() : "mixed";
}

// One pass in graph order: each activation takes the candidate with the best output
// SQNR, the others held at their current algorithm.
void refine_per_tensor(fx::GraphModule& gm, const std::vector<FakeQuantize*>& fqs,
                       const std::vector<std::vector<at::Tensor>>& samples, const at::Tensor& ref,
                       const std::vector<Algorithm>& candidates, RangeSearchResult* r) {
  for (FakeQuantize* fq : fqs) {
    auto& h = static_cast<HistogramObserver&>(fq->observer());
    const Algorithm was = h.configured_algorithm();
    Algorithm keep = was;
    for (Algorithm a : candidates) {
      if (a == was) continue;
      set_all({fq}, a);
      const double db = detail::sqnr_db(ref, detail::run_all_flat(gm, samples, "range_search"));
      if (db > r->sqnr_db) r->sqnr_db = db, keep = a;
    }
    set_all({fq}, keep);
    if (keep != was) ++r->per_tensor_changes;
  }
}

}  // namespace

int64_t set_activation_range_algorithm(fx::GraphModule& gm, Algorithm algorithm) {
  const auto fqs = histogram_activations(gm);
  set_all(fqs, algorithm);
  return static_cast<int64_t>(fqs.size());
}

int64_t count_histogram_activations(fx::GraphModule& gm) {
  return static_cast<int64_t>(histogram_activations(gm).size());
}

RangeSearchResult range_search(fx::GraphModule& gm, const NextBatch& data, const RangeSearchOptions& o) {
  at::NoGradGuard ng;
  if (o.candidates.empty()) throw ArgumentError("range_search: no candidate algorithms");
  if (o.num_samples < 1) throw ArgumentError("range_search: num_samples must be positive");
  const auto fqs = histogram_activations(gm);
  if (fqs.empty())
    throw ArgumentError("range_search: no activation is observed by a histogram observer (qconfig activation observer: histogram)");
  const auto samples = detail::take_samples(data, o.num_samples);
  if (samples.empty()) throw ArgumentError("range_search: no calibration data");
  RangeSearchResult r;
  r.configured = configured_of(fqs);
  r.tensors = static_cast<int64_t>(fqs.size());
  for (const auto& b : samples) r.samples += b.at(0).size(0);

  set_quant_state(gm, QuantState::kFloat);
  const at::Tensor ref = detail::run_all_flat(gm, samples, "range_search");
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  double best = -std::numeric_limits<double>::infinity();
  Algorithm chosen = o.candidates.front();
  for (Algorithm a : o.candidates) {
    set_all(fqs, a);
    const double db = detail::sqnr_db(ref, detail::run_all_flat(gm, samples, "range_search"));
    r.candidates.push_back({algorithm_name(a), db});
    if (db > best) best = db, chosen = a;
  }
  set_all(fqs, chosen);
  r.chosen = algorithm_name(chosen);
  r.sqnr_db = best;
  if (o.per_tensor) refine_per_tensor(gm, fqs, samples, ref, o.candidates, &r);
  return r;
}

}  // namespace qfx::quant
