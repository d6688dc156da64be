// The op catalog's activations that are not one ONNX op with float attributes
// (those are fx's shared unary table, export_unary_ops.cpp): relu6, silu, softmax
// and mish, the last two as the ONNX forms of ops ONNX (at the exported opset)
// lacks as one op.
#include <torch/nn/modules/activation.h>

#include "exporter.h"
#include "op_families.h"

namespace qfx::quant::detail {
namespace {

// SiLU (swish) as x * Sigmoid(x): ONNX has no SiLU op before opset 22.
void silu(Exporter& e, fx::Node& n) { e.gated(&n, "Sigmoid", "_sigmoid"); }

// relu6 as ONNX Clip(x, 0, 6).
void relu6(Exporter& e, fx::Node& n) {
  const std::string y = e.fresh(n.name());
  e.node("Clip", {e.value(n, n.args().at(0)), e.init("lo", at::full({}, 0.0f)), e.init("hi", at::full({}, 6.0f))}, y, n.name());
  e.names_[&n] = y;
  e.rank_[&n] = e.rank_of(n.args().at(0));
}

void softmax_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* sm = dynamic_cast<torch::nn::SoftmaxImpl*>(&m);
  if (!sm) unsupported(n, "module 'softmax' has no ONNX export in qfx yet");
  e.unary(&n, "Softmax");
  e.attr_i(e.last_, "axis", sm->options.dim());
}

// mish(x) = x * tanh(softplus(x)): ONNX Mish is opset 18, so its pieces (a chain of
// elementwise ops on one value, which the runtime runs as one table between DQ and Q).
void mish(Exporter& e, fx::Node& n) {
  const std::string& x = e.value(n, n.args().at(0));
  const std::string sp = e.fresh(n.name() + "_softplus");
  e.node("Softplus", {x}, sp, sp);
  const std::string th = e.fresh(n.name() + "_tanh");
  e.node("Tanh", {sp}, th, th);
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("Mul", {x, th}, y, n.name());
  e.names_[&n] = y;
  e.rank_[&n] = e.rank_of(n.args().at(0));
}

OpRecord activation(const std::string& name, const std::string& module, const std::string& what) {
  OpRecord r(name);
  if (!module.empty()) r.also_modules({module});
  return r.quantized_as(activation_kinds()).describe(what);
}

}  // namespace

void register_activation_ops(OpCatalog& c) {
  c.add(activation("relu6", "ReLU6", "min(max(x, 0), 6) (ONNX Clip)").fuses_as(FusionRole::kActivation, FusedActivation::kReLU6)
            .writes({"Clip"}).to_onnx(relu6));
  c.add(activation("silu", "SiLU", "x * sigmoid(x)").writes({"Sigmoid", "Mul"}).to_onnx(silu));
  c.add(activation("softmax", "Softmax", "ONNX Softmax along one axis").as_integer_only("Softmax")
            .also_aten({"_softmax"})
            .writes({"Softmax"})
            .to_onnx(
                [](Exporter& e, fx::Node& n) {
                  e.unary(&n, "Softmax");
                  e.attr_i(e.last_, "axis", e.ints_arg(n, 1).at(0));
                },
                softmax_module));
  c.add(activation("mish", "", "x * tanh(softplus(x))").writes({"Softplus", "Tanh", "Mul"}).to_onnx(mish));
}

}  // namespace qfx::quant::detail
