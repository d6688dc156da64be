// Per-layer sensitivity (see ptq_algorithms.h).
#include <ATen/ATen.h>

#include <algorithm>

#include "layers.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/error.h"

namespace qfx::quant {
namespace {

// The FakeQuantizes of one layer: its weight's and the one feeding its input.
std::vector<FakeQuantize*> layer_quantizers(fx::GraphModule& gm, const std::string& path, FusedConvLinear& f) {
  std::vector<FakeQuantize*> out{f.weight_fake_quant()};
  for (const fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::kCallModule || n->target() != path || n->args().empty() || !n->args()[0].is_node()) continue;
    const fx::Node* in = n->args()[0].node;
    if (in->op() == fx::Opcode::kCallModule)
      if (auto* fq = dynamic_cast<FakeQuantize*>(gm.get_submodule(in->target()).get())) out.push_back(fq);
  }
  return out;
}

}  // namespace

std::vector<LayerSensitivity> layer_sensitivity(fx::GraphModule& gm, const NextBatch& data, int64_t num_samples,
                                                double* all_db) {
  at::NoGradGuard ng;
  const auto samples = detail::take_samples(data, num_samples);
  if (samples.empty()) throw ArgumentError("layer_sensitivity: no calibration data");
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  std::vector<FakeQuantize*> all;
  for (const auto& m : gm.modules(/*include_self=*/false))
    if (auto* fq = dynamic_cast<FakeQuantize*>(m.get())) all.push_back(fq);
  auto set_all = [&](bool on) {
    for (auto* fq : all) fq->enable_fake_quant(on);
  };
  set_all(false);
  const at::Tensor ref = detail::run_all_flat(gm, samples, "layer_sensitivity");
  set_all(true);
  if (all_db) *all_db = detail::sqnr_db(ref, detail::run_all_flat(gm, samples, "layer_sensitivity"));
  std::vector<LayerSensitivity> out;
  for (const auto& l : detail::weighted_layers(gm)) {
    const auto mine = layer_quantizers(gm, l.path, *l.module);
    LayerSensitivity s;
    s.layer = l.path;
    set_all(false);
    for (auto* fq : mine) fq->enable_fake_quant(true);
    s.only_this_db = detail::sqnr_db(ref, detail::run_all_flat(gm, samples, "layer_sensitivity"));
    set_all(true);
    for (auto* fq : mine) fq->enable_fake_quant(false);
    s.all_but_this_db = detail::sqnr_db(ref, detail::run_all_flat(gm, samples, "layer_sensitivity"));
    out.push_back(s);
  }
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  std::stable_sort(out.begin(), out.end(),
                   [](const LayerSensitivity& a, const LayerSensitivity& b) { return a.only_this_db < b.only_this_db; });
  return out;
}

}  // namespace qfx::quant
