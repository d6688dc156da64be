// convert_fx: a prepared GraphModule -> the converted (reference quantized) GraphModule.
#include <ATen/ATen.h>

#include <map>
#include <set>

#include "qfx/error.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/quantized_modules.h"

namespace qfx::quant {

std::shared_ptr<fx::GraphModule> convert_fx(fx::GraphModule& prepared) {
  at::NoGradGuard ng;
  auto c = prepared.copy();
  std::map<std::string, std::shared_ptr<QuantDequant>> qd_of;  // FakeQuantize path -> its frozen form
  std::map<const fx::Node*, float> scale_of;                      // per-tensor scale of a QuantDequant output
  std::map<std::string, std::set<float>> input_scales;            // FusedConvLinear path -> its inputs' scales
  const auto nodes = c->graph().nodes();
  for (fx::Node* n : nodes) {
    if (n->op() != fx::Opcode::kCallModule) continue;
    auto m = prepared.get_submodule(n->target());
    if (auto* fq = dynamic_cast<FakeQuantize*>(m.get())) {
      auto& qd = qd_of[n->target()];
      if (!qd) {
        QParams q = fq->qparams();
        float lo = 0, hi = 0;
        auto mm = fq->observer().min_max();
        if (mm.first.numel() > 0) {
          lo = mm.first.min().item<float>();
          hi = mm.second.max().item<float>();
        }
        qd = std::make_shared<QuantDequant>(q, fq->observer().algorithm(), lo, hi);
      }
      if (!qd->qparams().per_channel) scale_of[n] = qd->qparams().scale.item<float>();
    } else if (dynamic_cast<FusedConvLinear*>(m.get())) {
      const fx::Argument& x = n->args().at(0);
      const bool known = x.is_node() && scale_of.count(x.node);
      input_scales[n->target()].insert(known ? scale_of[x.node] : -1.0f);
    }
  }
  for (const auto& [path, qd] : qd_of) c->replace_submodule(path, qd, quant_dequant_call_fn(qd));
  for (const auto& [path, scales] : input_scales) {
    auto* f = dynamic_cast<FusedConvLinear*>(prepared.get_submodule(path).get());
    // A module called on inputs of different scales keeps a float bias.
    const float sx = scales.size() == 1 ? *scales.begin() : -1.0f;
    auto q = std::make_shared<QuantizedConvLinear>(*f, /*quantize_weight=*/true, sx);
    c->replace_submodule(path, q, quantized_call_fn(q));
  }
  c->eval();
  return c;
}

}  // namespace qfx::quant
