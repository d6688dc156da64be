// The op catalog's activations: relu, relu6, sigmoid, tanh, hardswish, silu,
// hardsigmoid, leaky_relu, softmax, elu and mish, and the ONNX forms of those ONNX (at
// the exported opset) lacks as one op.
#include <torch/nn/modules/activation.h>

#include "exporter.h"
#include "op_families.h"

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

namespace {

void softmax_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* sm = dynamic_cast<torch::nn::SoftmaxImpl*>(&m);
  if (!sm) unsupported(n, "module 'softmax' has no ONNX export in qfx yet");
  e.unary(&n, "Softmax");
  e.attr_i(e.last_, "axis", sm->options.dim());
}

void leaky_relu_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* lr = dynamic_cast<torch::nn::LeakyReLUImpl*>(&m);
  if (!lr) unsupported(n, "module 'leaky_relu' has no ONNX export in qfx yet");
  e.unary(&n, "LeakyRelu");
  e.attr_f(e.last_, "alpha", static_cast<float>(lr->options.negative_slope()));
}

// aten::elu(self, alpha=1, scale=1, input_scale=1): ONNX Elu (opset 6) has alpha
// only, so scale and input_scale (SELU / CELU spellings) must be 1.
void elu(Exporter& e, fx::Node& n) {
  if (e.num_arg(n, 2, 1.0) != 1.0 || e.num_arg(n, 3, 1.0) != 1.0) unsupported(n, "elu with scale or input_scale other than 1");
  e.unary(&n, "Elu");
  e.attr_f(e.last_, "alpha", static_cast<float>(e.num_arg(n, 1, 1.0)));
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
  c.add(activation("relu", "ReLU", "max(x, 0) (ONNX Relu)").to_onnx([](Exporter& e, fx::Node& n) { e.unary(&n, "Relu"); }));
  c.add(activation("relu6", "ReLU6", "min(max(x, 0), 6) (ONNX Clip)").to_onnx([](Exporter& e, fx::Node& n) { e.clip(&n, 0.0f, 6.0f); }));
  c.add(activation("sigmoid", "Sigmoid", "ONNX Sigmoid").as_table("Sigmoid").to_onnx([](Exporter& e, fx::Node& n) { e.unary(&n, "Sigmoid"); }));
  c.add(activation("tanh", "Tanh", "ONNX Tanh").as_table("Tanh").to_onnx([](Exporter& e, fx::Node& n) { e.unary(&n, "Tanh"); }));
  c.add(activation("hardswish", "Hardswish", "x * relu6(x + 3) / 6 (ONNX HardSwish from opset 14)").as_table("HardSwish")
            .to_onnx([](Exporter& e, fx::Node& n) { e.hardswish(&n); }));
  c.add(activation("silu", "SiLU", "x * sigmoid(x)").to_onnx([](Exporter& e, fx::Node& n) { e.silu(&n); }));
  c.add(activation("hardsigmoid", "Hardsigmoid", "relu6(x + 3) / 6 (ONNX HardSigmoid, alpha 1/6)").as_table("HardSigmoid")
            .to_onnx([](Exporter& e, fx::Node& n) { e.hardsigmoid(&n); }));
  c.add(activation("leaky_relu", "LeakyReLU", "ONNX LeakyRelu")
            .to_onnx(
                [](Exporter& e, fx::Node& n) {
                  e.unary(&n, "LeakyRelu");
                  e.attr_f(e.last_, "alpha", static_cast<float>(e.num_arg(n, 1, 0.01)));
                },
                leaky_relu_module));
  c.add(activation("softmax", "Softmax", "ONNX Softmax along one axis").as_integer_only("Softmax")
            .also_aten({"_softmax"})
            .to_onnx(
                [](Exporter& e, fx::Node& n) {
                  e.unary(&n, "Softmax");
                  e.attr_i(e.last_, "axis", e.ints_arg(n, 1).at(0));
                },
                softmax_module));
  c.add(activation("mish", "", "x * tanh(softplus(x))").to_onnx(mish));
  c.add(activation("elu", "", "x if x > 0 else alpha * (exp(x) - 1) (ONNX Elu)").as_table("Elu").to_onnx(elu, nullptr, 6));
}

}  // namespace qfx::quant::detail
