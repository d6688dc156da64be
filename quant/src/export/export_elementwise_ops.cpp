// export_onnx's float elementwise ops with a one-to-one ONNX operator: the unary
// math ops, comparisons and logic, where, pow, rsub, clamp / hardtanh, leaky_relu,
// log_softmax and dtype casts (what a float ONNX model's graph carries between its
// quantized groups; see exporter.h).
#include <map>
#include <set>

#include "exporter.h"

namespace qfx::quant::detail {
namespace {

// ONNX TensorProto element type of a c10::ScalarType code; -1 for others.
int onnx_type(int64_t scalar_type) {
  switch (static_cast<c10::ScalarType>(scalar_type)) {
    case c10::ScalarType::Float: return onnx::TensorProto::FLOAT;
    case c10::ScalarType::Double: return onnx::TensorProto::DOUBLE;
    case c10::ScalarType::Half: return onnx::TensorProto::FLOAT16;
    case c10::ScalarType::Long: return onnx::TensorProto::INT64;
    case c10::ScalarType::Int: return onnx::TensorProto::INT32;
    case c10::ScalarType::Short: return onnx::TensorProto::INT16;
    case c10::ScalarType::Char: return onnx::TensorProto::INT8;
    case c10::ScalarType::Byte: return onnx::TensorProto::UINT8;
    case c10::ScalarType::Bool: return onnx::TensorProto::BOOL;
    default: return -1;
  }
}

}  // namespace

bool Exporter::elementwise_function(fx::Node* n, const std::string& op) {
  static const std::map<std::string, std::string> unaries = {
      {"abs", "Abs"},   {"neg", "Neg"},   {"exp", "Exp"},         {"log", "Log"},   {"sqrt", "Sqrt"},
      {"reciprocal", "Reciprocal"},       {"floor", "Floor"},     {"ceil", "Ceil"}, {"erf", "Erf"},
      {"sin", "Sin"},   {"cos", "Cos"},   {"softplus", "Softplus"}, {"logical_not", "Not"}, {"sign", "Sign"}};
  static const std::map<std::string, std::string> binaries = {
      {"eq", "Equal"},  {"lt", "Less"},   {"gt", "Greater"}, {"le", "LessOrEqual"}, {"ge", "GreaterOrEqual"},
      {"logical_and", "And"}, {"logical_or", "Or"}, {"pow", "Pow"}};
  if (auto u = unaries.find(op); u != unaries.end()) {
    unary(n, u->second);
    return true;
  }
  if (auto b = binaries.find(op); b != binaries.end()) {
    binary(n, b->second);
    return true;
  }
  static const std::set<std::string> others = {"rsub", "where", "clamp", "hardtanh", "leaky_relu", "log_softmax", "to"};
  if (!others.count(op) || (op == "to" && !(n->args().size() > 1 && n->args()[1].is_const() && n->args()[1].value.isInt())))
    return false;
  const std::string y = fresh(n->name());  // only for an op written here: names stay as without this file
  const int r0 = rank_of(n->args().at(0));
  if (op == "rsub") {  // other - self (alpha 1)
    if (n->args().size() > 2 && num_arg(*n, 2, 1.0) != 1.0) unsupported(*n, "alpha != 1");
    last_ = node("Sub", {operand(*n, n->args().at(1)), operand(*n, n->args().at(0))}, y, n->name());
  } else if (op == "where") {
    last_ = node("Where", {value(*n, n->args().at(0)), operand(*n, n->args().at(1)), operand(*n, n->args().at(2))}, y, n->name());
  } else if (op == "clamp" || op == "hardtanh") {
    std::vector<std::string> in = {value(*n, n->args().at(0))};
    for (size_t i = 1; i < 3; ++i) {
      const bool given = i < n->args().size() && n->args()[i].is_const() && (n->args()[i].value.isDouble() || n->args()[i].value.isInt());
      in.push_back(given ? init(i == 1 ? "min" : "max", at::full({}, static_cast<float>(num_arg(*n, i, 0.0)))) : std::string());
    }
    while (!in.empty() && in.back().empty()) in.pop_back();
    last_ = node("Clip", in, y, n->name());
  } else if (op == "leaky_relu") {
    last_ = node("LeakyRelu", {value(*n, n->args().at(0))}, y, n->name());
    attr_f(last_, "alpha", static_cast<float>(num_arg(*n, 1, 0.01)));
  } else if (op == "log_softmax") {
    last_ = node("LogSoftmax", {value(*n, n->args().at(0))}, y, n->name());
    attr_i(last_, "axis", ints_arg(*n, 1).at(0));
  } else {  // to(dtype)
    const int t = onnx_type(n->args()[1].value.toInt());
    if (t < 0) unsupported(*n, "a cast to a dtype ONNX lacks");
    last_ = node("Cast", {value(*n, n->args().at(0))}, y, n->name());
    attr_i(last_, "to", t);
  }
  names_[n] = y;
  int r = r0;
  for (const auto& a : n->args())
    if (a.is_node()) r = std::max(r, rank_of(a));
  rank_[n] = r;
  return true;
}

}  // namespace qfx::quant::detail
