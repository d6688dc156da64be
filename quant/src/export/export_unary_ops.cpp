// The op catalog's records of fx's shared unary table (qfx/fx/onnx_unary_ops.h):
// each row (an ONNX op with float attributes that is one aten op) is exported as
// that ONNX op, and read back by the float-ONNX reader from the same row. What
// only the quantization side knows of such an op (its torch.nn module class,
// whether a target may run it in int8, whether it has a 256-entry table form) is
// the short list below; a row it does not name computes in float.
#include <torch/nn/modules/activation.h>

#include <cstdio>

#include "exporter.h"
#include "op_families.h"
#include "qfx/fx/onnx_unary_ops.h"

namespace qfx::quant::detail {
namespace {

// The quantization facts of a row's op.
struct Quantization {
  const char* op;      // the row's aten name
  const char* module;  // its torch.nn class, "" for none
  bool quantized;      // a target may run it in int8 (activation_kinds), else float only
  bool table;          // its ONNX op has a 256-entry table form (arithmetic.lut)
  FusedActivation fused = FusedActivation::kNone;  // ends fusion patterns as this activation
};

const Quantization* quantization_of(const std::string& op) {
  static const Quantization facts[] = {
      {"relu", "ReLU", true, false, FusedActivation::kReLU}, {"sigmoid", "Sigmoid", true, true},
      {"tanh", "Tanh", true, true},           {"hardswish", "Hardswish", true, true},
      {"hardsigmoid", "Hardsigmoid", true, true}, {"leaky_relu", "LeakyReLU", true, false},
      {"elu", "", true, true},                {"exp", "", false, true},
      {"erf", "", false, true},               {"softplus", "Softplus", true, true},
  };
  for (const auto& f : facts)
    if (op == f.op) return &f;
  return nullptr;
}

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// Node `n` (aten `r.aten`) as ONNX `r.onnx`: its attribute arguments as float
// attributes, its fixed ones checked, the row's fixed attributes ONNX does not
// default to.
void emit_row(Exporter& e, fx::Node& n, const fx::UnaryOnnxOp& r) {
  for (size_t i = 0; i < r.arguments.size(); ++i) {
    const auto& a = r.arguments[i];
    if (a.attribute.empty() && e.num_arg(n, i + 1, a.value) != a.value)
      unsupported(n, r.aten + " with argument " + std::to_string(i + 1) + " other than " + number(a.value) + " (ONNX " + r.onnx +
                         " has no such attribute)");
  }
  e.unary(&n, r.onnx);
  for (size_t i = 0; i < r.arguments.size(); ++i)
    if (!r.arguments[i].attribute.empty())
      e.attr_f(e.last_, r.arguments[i].attribute, static_cast<float>(e.num_arg(n, i + 1, r.arguments[i].value)));
  for (const auto& f : r.fixed)
    if (static_cast<float>(f.value) != f.onnx_default) e.attr_f(e.last_, f.name, static_cast<float>(f.value));
}

// HardSwish is an ONNX op from opset 14 (the row); before it, x * HardSigmoid(x)
// with alpha 1/6 and beta 0.5 (ONNX Runtime refuses HardSwish in an opset-13 model).
void hardswish_before_14(Exporter& e, fx::Node& n) {
  auto* hs = e.gated(&n, "HardSigmoid", "_hardsigmoid");
  e.attr_f(hs, "alpha", 1.0f / 6.0f);
  e.attr_f(hs, "beta", 0.5f);
}

// nn.LeakyReLU: its negative_slope is the module's option, not an argument.
void leaky_relu_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* lr = dynamic_cast<torch::nn::LeakyReLUImpl*>(&m);
  if (!lr) unsupported(n, "module 'leaky_relu' has no ONNX export in qfx yet");
  e.unary(&n, "LeakyRelu");
  e.attr_f(e.last_, "alpha", static_cast<float>(lr->options.negative_slope()));
}

OpRecord record_of(const fx::UnaryOnnxOp& row) {
  const Quantization* q = quantization_of(row.aten);
  const bool quantized = q && q->quantized;
  OpRecord r(row.aten);
  if (q && *q->module) r.also_modules({q->module});
  if (quantized) r.quantized_as(activation_kinds());
  if (q && q->table) r.as_table(row.onnx);
  if (q && q->fused != FusedActivation::kNone) r.fuses_as(FusionRole::kActivation, q->fused);
  r.describe(row.summary + " (ONNX " + row.onnx + (quantized ? ")" : ", in float)")).writes({row.onnx});
  if (row.aten == "hardswish") r.writes({"HardSigmoid", "Mul"}).to_onnx(hardswish_before_14);
  auto module = row.aten == "leaky_relu" ? &leaky_relu_module : nullptr;
  return r.to_onnx([&row](Exporter& e, fx::Node& n) { emit_row(e, n, row); }, module, row.since_opset);
}

}  // namespace

void register_unary_ops(OpCatalog& c) {
  for (const auto& row : fx::unary_onnx_ops()) c.add(record_of(row));
}

}  // namespace qfx::quant::detail
