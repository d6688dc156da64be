// report.json's "observers" and "weights": the statistics behind each encoding.
#include "observer_report.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/observer.h"

namespace qfx::quant::detail {

namespace {

// 5 significant digits: report sizes stay small, charts lose nothing visible.
double round5(double x) {
  if (!std::isfinite(x) || x == 0) return std::isfinite(x) ? x : 0.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.5g", x);
  return std::strtod(buf, nullptr);
}

nlohmann::json rounded(const at::Tensor& t) {
  at::Tensor c = t.reshape({-1}).to(at::kDouble).contiguous();
  nlohmann::json a = nlohmann::json::array();
  for (int64_t i = 0; i < c.numel(); ++i) a.push_back(round5(c.data_ptr<double>()[i]));
  return a;
}

}  // namespace

nlohmann::json observer_statistics(const fx::GraphModule& prepared, int max_bins) {
  nlohmann::json out = nlohmann::json::array();
  for (const fx::Node* n : prepared.graph().nodes()) {
    if (n->op() != fx::Opcode::kCallModule || n->args().empty() || !n->args()[0].is_node()) continue;
    auto* fq = dynamic_cast<FakeQuantize*>(prepared.get_submodule(n->target()).get());
    if (!fq) continue;
    const ObserverBase& ob = fq->observer();
    const auto mm = ob.min_max();
    if (mm.first.numel() != 1 || !std::isfinite(mm.first.item<double>())) continue;  // per-channel or never observed
    const auto clip = ob.clip_range();
    nlohmann::json j = {{"node", n->args()[0].node->name()},
                        {"observer", ob.name()},
                        {"algorithm", ob.algorithm()},
                        {"min", round5(mm.first.item<double>())},
                        {"max", round5(mm.second.item<double>())},
                        {"clip", {round5(clip.first.min().item<double>()), round5(clip.second.max().item<double>())}},
                        {"qscheme", ob.spec().qscheme == QScheme::kSymmetric ? "symmetric" : "affine"},
                        {"quant_min", ob.spec().quant_min},
                        {"quant_max", ob.spec().quant_max}};
    if (auto* h = dynamic_cast<const HistogramObserver*>(&ob)) {
      const Histogram hist = h->histogram();
      const size_t nb = hist.counts.size();
      const size_t k = nb == 0 ? 1 : (nb + static_cast<size_t>(max_bins) - 1) / static_cast<size_t>(max_bins);
      nlohmann::json counts = nlohmann::json::array();
      for (size_t i = 0; i < nb; i += k) {
        double s = 0;
        for (size_t b = i; b < std::min(nb, i + k); ++b) s += hist.counts[b];
        counts.push_back(round5(s));
      }
      j["hist"] = {{"lo", round5(hist.lo)}, {"width", round5(hist.width * static_cast<double>(k))}, {"counts", counts}};
    }
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json weight_ranges(const fx::GraphModule& prepared) {
  nlohmann::json out = nlohmann::json::array();
  for (const fx::Node* n : prepared.graph().nodes()) {
    if (n->op() != fx::Opcode::kCallModule) continue;
    auto* f = dynamic_cast<FusedConvLinear*>(prepared.get_submodule(n->target()).get());
    if (!f || !f->weight_fake_quant()) continue;
    // The weight as deployed (batch norm folded), per output channel, whatever the
    // observer's granularity.
    const at::Tensor w = f->folded_weight_bias().first.detach();
    const at::Tensor c = w.transpose(0, f->weight_out_axis()).reshape({w.size(f->weight_out_axis()), -1});
    if (c.numel() == 0) continue;
    out.push_back({{"node", n->name()}, {"channels", c.size(0)}, {"min", rounded(std::get<0>(c.min(1)))},
                   {"max", rounded(std::get<0>(c.max(1)))}});
  }
  return out;
}

}  // namespace qfx::quant::detail
