// Cross-layer equalisation (see ptq_algorithms.h).
#include <ATen/ATen.h>

#include <cmath>

#include "layers.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/error.h"

namespace qfx::quant {
namespace {

struct Pair {
  std::string first_path, second_path;
  std::shared_ptr<FusedConvLinear> first, second;
};

bool equalizable_first(const FusedConvLinear& f) {
  return (f.op() == FusedConvLinear::Op::kConv || f.op() == FusedConvLinear::Op::kLinear) && !f.bn_simulated() &&
         (f.activation() == FusedActivation::kNone || f.activation() == FusedActivation::kReLU);
}

// Per-input-channel view of a second layer's weight: [groups, out/groups, in/groups, rest].
at::Tensor grouped(const at::Tensor& w, int64_t groups) {
  return w.reshape({groups, w.size(0) / groups, w.size(1), -1});
}

// Range (max |w|) of each input channel of `f`'s weight: [C_in].
at::Tensor input_ranges(const FusedConvLinear& f) {
  const at::Tensor w = f.weight().detach();
  const int64_t g = f.op() == FusedConvLinear::Op::kLinear ? 1 : f.groups();
  return grouped(w, g).abs().amax({1, 3}).reshape({-1});
}

// Range of each output channel of `f`'s weight: [C_out].
at::Tensor output_ranges(const FusedConvLinear& f) {
  const at::Tensor w = f.weight().detach();
  return w.reshape({w.size(0), -1}).abs().amax(1);
}

double spread(const at::Tensor& r) {
  const at::Tensor pos = r.masked_select(r > 0);
  if (pos.numel() == 0) return 1.0;
  return (pos.max() / pos.min()).item<double>();
}

std::vector<Pair> find_pairs(fx::GraphModule& gm) {
  std::vector<Pair> out;
  for (const fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::kCallModule) continue;
    auto a = std::dynamic_pointer_cast<FusedConvLinear>(gm.get_submodule(n->target()));
    if (!a || !equalizable_first(*a) || n->users().size() != 1) continue;
    const fx::Node* prev = n;
    const fx::Node* next = n->users()[0];
    auto* fq = next->op() == fx::Opcode::kCallModule ? dynamic_cast<FakeQuantize*>(gm.get_submodule(next->target()).get())
                                                     : nullptr;
    if (fq) {
      if (fq->observer().has_data())
        throw ArgumentError("cross_layer_equalization: the observer '" + next->target() +
                               "' already saw data; equalise before calibration");
      if (next->users().size() != 1) continue;
      prev = next;
      next = next->users()[0];
    }
    if (next->op() != fx::Opcode::kCallModule) continue;
    auto b = std::dynamic_pointer_cast<FusedConvLinear>(gm.get_submodule(next->target()));
    if (!b || b->bn_simulated() || b.get() == a.get()) continue;
    if (b->op() != FusedConvLinear::Op::kConv && b->op() != FusedConvLinear::Op::kLinear) continue;
    if ((a->op() == FusedConvLinear::Op::kLinear) != (b->op() == FusedConvLinear::Op::kLinear)) continue;
    const int64_t in_b = b->weight().size(1) * (b->op() == FusedConvLinear::Op::kLinear ? 1 : b->groups());
    if (in_b != a->out_channels()) continue;
    if (next->args().empty() || !next->args()[0].is_node() || next->args()[0].node != prev) continue;
    out.push_back({n->target(), next->target(), a, b});
  }
  return out;
}

}  // namespace

std::vector<EqualizedPair> cross_layer_equalization(fx::GraphModule& gm, int iterations) {
  at::NoGradGuard ng;
  const std::vector<Pair> pairs = find_pairs(gm);
  std::vector<EqualizedPair> report(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    report[i].first = pairs[i].first_path;
    report[i].second = pairs[i].second_path;
    report[i].spread_first_before = spread(output_ranges(*pairs[i].first));
    report[i].spread_second_before = spread(input_ranges(*pairs[i].second));
  }
  for (const Pair& p : pairs) {  // the user's model keeps its weights
    p.first->unshare_parameters();
    p.second->unshare_parameters();
  }
  for (int it = 0; it < iterations; ++it) {
    for (const Pair& p : pairs) {
      const at::Tensor r1 = output_ranges(*p.first), r2 = input_ranges(*p.second);
      at::Tensor s = at::sqrt(r1 * r2) / r2;
      s = at::where((r1 > 0) & (r2 > 0) & at::isfinite(s), s, at::ones_like(s));
      at::Tensor w1 = p.first->weight().detach();
      w1.div_(detail::along(s, w1.dim(), 0));
      if (p.first->bias().defined()) p.first->bias().detach().div_(s);
      at::Tensor w2 = p.second->weight().detach();
      const int64_t g = p.second->op() == FusedConvLinear::Op::kLinear ? 1 : p.second->groups();
      w2.copy_((grouped(w2, g) * s.reshape({g, 1, -1, 1})).reshape(w2.sizes()));
    }
  }
  for (size_t i = 0; i < pairs.size(); ++i) {
    report[i].spread_first_after = spread(output_ranges(*pairs[i].first));
    report[i].spread_second_after = spread(input_ranges(*pairs[i].second));
  }
  return report;
}

}  // namespace qfx::quant
