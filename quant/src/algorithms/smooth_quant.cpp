// SmoothQuant (see ptq_algorithms.h).
#include <ATen/ATen.h>

#include <optional>

#include "layers.h"
#include "norm_scale.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/error.h"

namespace qfx::quant {
namespace {

double spread(const at::Tensor& r) {
  const at::Tensor pos = r.masked_select(r > 0);
  return pos.numel() ? (pos.max() / pos.min()).item<double>() : 1.0;
}

}  // namespace

std::vector<SmoothedNorm> smooth_quant(fx::GraphModule& gm, const NextBatch& data, double alpha, int64_t num_samples) {
  if (!(alpha > 0 && alpha < 1)) throw ArgumentError("smooth_quant: alpha must be in (0, 1)");
  const auto samples = detail::take_samples(data, num_samples);
  if (samples.empty()) throw ArgumentError("smooth_quant: no calibration data");
  std::vector<SmoothedNorm> out;
  for (fx::Node* n : gm.graph().nodes()) {
    auto norm = detail::as_norm(gm, n);
    if (!norm) continue;
    // Consumers: Linear layers only, directly or through one activation FakeQuantize.
    std::vector<std::pair<std::string, std::shared_ptr<FusedConvLinear>>> linears;
    bool ok = !n->users().empty();
    for (fx::Node* u : n->users()) {
      std::vector<fx::Node*> readers{u};
      if (u->op() == fx::Opcode::kCallModule) {
        if (auto* fq = dynamic_cast<FakeQuantize*>(gm.get_submodule(u->target()).get())) {
          if (fq->observer().has_data())
            throw ArgumentError("smooth_quant: the observer '" + u->target() + "' already saw data; smooth before calibration");
          readers = u->users();
        }
      }
      for (fx::Node* r : readers) {
        auto f = r->op() == fx::Opcode::kCallModule ? std::dynamic_pointer_cast<FusedConvLinear>(gm.get_submodule(r->target()))
                                                    : nullptr;
        if (!f || f->op() != FusedConvLinear::Op::kLinear || f->bn_simulated()) ok = false;
        else linears.emplace_back(r->target(), f);
      }
    }
    if (!ok || linears.empty()) continue;
    // Activation range per channel (the float model) and weight range per input channel.
    at::Tensor x;
    {
      set_quant_state(gm, QuantState::kFloat);
      x = detail::capture_input(gm, linears[0].first, samples);
    }
    at::NoGradGuard ng;
    const at::Tensor act = x.reshape({-1, x.size(-1)}).abs().amax(0);
    at::Tensor wmax = at::zeros_like(act);
    for (const auto& l : linears) wmax = at::maximum(wmax, l.second->weight().detach().abs().amax(0));
    at::Tensor s = at::pow(act, alpha) / at::pow(wmax, 1 - alpha);
    s = at::where((act > 0) & (wmax > 0) & at::isfinite(s), s.clamp_min(1e-5), at::ones_like(s));
    SmoothedNorm rep;
    rep.norm = n->name();
    rep.spread_before = spread(act);
    rep.spread_after = spread(act / s);
    detail::scale_norm(gm, *norm, s, "_smoothed");
    for (const auto& l : linears) {
      l.second->unshare_parameters();
      at::Tensor w = l.second->weight().detach();
      w.mul_(s.reshape({1, -1}));
      rep.linears.push_back(l.first);
    }
    out.push_back(rep);
  }
  set_quant_state(gm, QuantState::kCalibration);
  return out;
}

}  // namespace qfx::quant
