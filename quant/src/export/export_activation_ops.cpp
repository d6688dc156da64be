// export_onnx's activations that ONNX (at the exported opset) lacks as one op (see exporter.h).
#include "exporter.h"

namespace qfx::quant::detail {

// SiLU (swish) as x * Sigmoid(x): ONNX has no SiLU op before opset 22.
void Exporter::silu(fx::Node* n) {
  const std::string& x = value(*n, n->args().at(0));
  const std::string s = fresh(n->name() + "_sigmoid");
  node("Sigmoid", {x}, s, n->name() + "_sigmoid");
  const std::string y = fresh(n->name());
  last_ = node("Mul", {x, s}, y, n->name());
  names_[n] = y;
  rank_[n] = rank_of(n->args().at(0));
}

// HardSwish is an ONNX op from opset 14; before it, x * HardSigmoid(x) with
// alpha 1/6 and beta 0.5 (ONNX Runtime refuses HardSwish in an opset-13 model).
void Exporter::hardswish(fx::Node* n) {
  if (opt_.opset >= 14) {
    unary(n, "HardSwish");
    return;
  }
  const std::string& x = value(*n, n->args().at(0));
  const std::string s = fresh(n->name() + "_hardsigmoid");
  auto* hs = node("HardSigmoid", {x}, s, n->name() + "_hardsigmoid");
  attr_f(hs, "alpha", 1.0f / 6.0f);
  attr_f(hs, "beta", 0.5f);
  const std::string y = fresh(n->name());
  last_ = node("Mul", {x, s}, y, n->name());
  names_[n] = y;
  rank_[n] = rank_of(n->args().at(0));
}

}  // namespace qfx::quant::detail
