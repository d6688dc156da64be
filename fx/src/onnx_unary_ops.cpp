#include "qfx/fx/onnx_unary_ops.h"

namespace qfx::fx {

// Data table. Softplus: ONNX's has no beta or threshold, aten's defaults (1, 20) are
// what it computes. Mish is not a row: qfx writes it as Softplus, Tanh and Mul (ONNX
// Mish is opset 18), which the reader reads back as aten::mish.
const std::vector<UnaryOnnxOp>& unary_onnx_ops() {
  static const std::vector<UnaryOnnxOp> rows = {
      {"Relu", "relu", "aten::relu", 1, {}, {}, "max(x, 0)"},
      {"Sigmoid", "sigmoid", "aten::sigmoid", 1, {}, {}, "1 / (1 + exp(-x))"},
      {"Tanh", "tanh", "aten::tanh", 1, {}, {}, "tanh(x)"},
      {"HardSwish", "hardswish", "aten::hardswish", 14, {}, {}, "x * relu6(x + 3) / 6"},
      {"HardSigmoid", "hardsigmoid", "aten::hardsigmoid", 1, {}, {{"alpha", 1.0 / 6.0, 0.2f}, {"beta", 0.5, 0.5f}},
       "relu6(x + 3) / 6 (alpha 1/6, beta 1/2)"},
      {"LeakyRelu", "leaky_relu", "aten::leaky_relu", 1, {{"alpha", 0.01}}, {}, "x if x >= 0 else alpha * x"},
      {"Elu", "elu", "aten::elu", 6, {{"alpha", 1.0}, {"", 1.0}, {"", 1.0}}, {},
       "x if x > 0 else alpha * (exp(x) - 1) (scale and input_scale 1)"},
      {"Softplus", "softplus", "aten::softplus", 1, {}, {}, "log(1 + exp(x))"},
      {"Abs", "abs", "aten::abs", 1, {}, {}, "|x|"},
      {"Neg", "neg", "aten::neg", 1, {}, {}, "-x"},
      {"Exp", "exp", "aten::exp", 1, {}, {}, "e^x"},
      {"Log", "log", "aten::log", 1, {}, {}, "natural logarithm"},
      {"Sqrt", "sqrt", "aten::sqrt", 1, {}, {}, "square root"},
      {"Reciprocal", "reciprocal", "aten::reciprocal", 1, {}, {}, "1 / x"},
      {"Floor", "floor", "aten::floor", 1, {}, {}, "round down"},
      {"Ceil", "ceil", "aten::ceil", 1, {}, {}, "round up"},
      {"Erf", "erf", "aten::erf", 1, {}, {}, "the error function"},
      {"Sin", "sin", "aten::sin", 1, {}, {}, "sine"},
      {"Cos", "cos", "aten::cos", 1, {}, {}, "cosine"},
      {"Sign", "sign", "aten::sign", 1, {}, {}, "-1, 0 or 1"},
      {"Not", "logical_not", "aten::logical_not", 1, {}, {}, "logical not"},
      {"Tan", "tan", "aten::tan", 7, {}, {}, "tangent"},
      {"Asin", "asin", "aten::asin", 7, {}, {}, "arcsine"},
      {"Acos", "acos", "aten::acos", 7, {}, {}, "arccosine"},
      {"Atan", "atan", "aten::atan", 7, {}, {}, "arctangent"},
      {"Sinh", "sinh", "aten::sinh", 9, {}, {}, "hyperbolic sine"},
      {"Cosh", "cosh", "aten::cosh", 9, {}, {}, "hyperbolic cosine"},
      {"Asinh", "asinh", "aten::asinh", 9, {}, {}, "inverse hyperbolic sine"},
      {"Acosh", "acosh", "aten::acosh", 9, {}, {}, "inverse hyperbolic cosine"},
      {"Atanh", "atanh", "aten::atanh", 9, {}, {}, "inverse hyperbolic tangent"},
      {"Round", "round", "aten::round", 11, {}, {}, "round half to even"},
      {"IsNaN", "isnan", "aten::isnan", 9, {}, {}, "x is NaN (bool)"},
      {"IsInf", "isinf", "aten::isinf", 10, {}, {}, "x is +inf or -inf (bool)"},
  };
  return rows;
}

const UnaryOnnxOp* find_unary_onnx_op(const std::string& onnx) {
  for (const auto& r : unary_onnx_ops())
    if (r.onnx == onnx) return &r;
  return nullptr;
}

const UnaryOnnxOp* find_unary_aten_op(const std::string& aten) {
  for (const auto& r : unary_onnx_ops())
    if (r.aten == aten) return &r;
  return nullptr;
}

}  // namespace qfx::fx
