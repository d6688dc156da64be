// batch_shapes (see batch_shapes.h).
#include "batch_shapes.h"

#include <ATen/ATen.h>

#include "qfx/error.h"
#include "qfx/fx/shape_prop.h"
#include "qfx/quant/fake_quantize.h"

namespace qfx::quant::detail {

std::map<const fx::Node*, std::vector<Dim>> batch_shapes(fx::GraphModule& gm,
                                                         const std::vector<std::vector<int64_t>>& input_shapes,
                                                         const std::vector<std::string>& input_dtypes) {
  if (input_shapes.empty()) throw UnsupportedOpError("export_onnx: shape arithmetic (size(), chunk) needs ExportOptions::input_shapes");
  for (const auto& s : input_shapes)
    for (size_t d = 1; d < s.size(); ++d)
      if (s[d] < 0) throw UnsupportedOpError("export_onnx: shape arithmetic needs static input dims after the batch");
  // Nothing may learn from these runs, and nothing in them may depend on qparams (a
  // model exported before calibration has none yet): eval mode, observers paused,
  // fake quantization off.
  struct Was {
    FakeQuantize* fq;
    bool observer, fake_quant;
  };
  const bool training = gm.is_training();
  std::vector<Was> observers;
  for (const auto& m : gm.modules(/*include_self=*/false))
    if (auto* fq = dynamic_cast<FakeQuantize*>(m.get())) observers.push_back({fq, fq->observer_enabled(), fq->fake_quant_enabled()});
  gm.eval();
  for (const Was& w : observers) {
    w.fq->enable_observer(false);
    w.fq->enable_fake_quant(false);
  }
  auto restore = [&] {
    gm.train(training);
    for (const Was& w : observers) {
      w.fq->enable_observer(w.observer);
      w.fq->enable_fake_quant(w.fake_quant);
    }
  };
  auto run = [&](int64_t batch) {
    std::vector<std::vector<int64_t>> in = input_shapes;
    for (auto& s : in)
      if (!s.empty() && s[0] < 0) s[0] = batch;
    at::NoGradGuard ng;
    fx::propagate_shapes(gm, in, input_dtypes);
    std::map<const fx::Node*, std::vector<int64_t>> out;
    for (const fx::Node* n : gm.graph().nodes()) {
      auto it = n->meta().find("shape");
      if (it != n->meta().end() && it->second.isIntList()) out[n] = it->second.toIntVector();
    }
    return out;
  };
  std::map<const fx::Node*, std::vector<int64_t>> s2, s3;
  try {
    s2 = run(2);
    s3 = run(3);
  } catch (...) {
    restore();
    throw;
  }
  restore();
  std::map<const fx::Node*, std::vector<Dim>> dims;
  for (const auto& [n, a] : s2) {
    auto it = s3.find(n);
    if (it == s3.end() || it->second.size() != a.size()) continue;
    std::vector<Dim> d(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const int64_t x = a[i], y = it->second[i];
      if (x == y) d[i] = {x, false};
      else if (x > 0 && x % 2 == 0 && y % 3 == 0 && x / 2 == y / 3) d[i] = {x / 2, true};  // batch x k
      else d[i] = {-1, false};
    }
    dims[n] = d;
  }
  return dims;
}

}  // namespace qfx::quant::detail
