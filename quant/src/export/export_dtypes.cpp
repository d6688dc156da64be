// Element types in the exported graph: what each value's dtype is (shape propagation's
// meta), torch's type promotion over an op's operands, and operands cast to it, so
// integer and bool arithmetic exports with the types PyTorch computes in.
#include <ATen/ATen.h>
#include <ATen/native/TypeProperties.h>

#include "export_shape.h"
#include "exporter.h"

namespace qfx::quant::detail {
namespace {

std::optional<at::ScalarType> parse_dtype(const std::string& s) {
  static const std::map<std::string, at::ScalarType> names = {
      {"Float", at::kFloat}, {"Double", at::kFloat}, {"Half", at::kFloat}, {"BFloat16", at::kFloat}, {"Long", at::kLong},
      {"Int", at::kInt},     {"Short", at::kShort},  {"Char", at::kChar},  {"Byte", at::kByte},        {"Bool", at::kBool}};
  auto it = names.find(s);
  if (it == names.end()) return std::nullopt;
  return it->second;
}

}  // namespace

int Exporter::onnx_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return onnx::TensorProto::FLOAT;
    case at::kLong: return onnx::TensorProto::INT64;
    case at::kInt: return onnx::TensorProto::INT32;
    case at::kShort: return onnx::TensorProto::INT16;
    case at::kChar: return onnx::TensorProto::INT8;
    case at::kByte: return onnx::TensorProto::UINT8;
    case at::kBool: return onnx::TensorProto::BOOL;
    default: return -1;
  }
}

std::optional<at::ScalarType> Exporter::dtype_of(const fx::Argument& a) {
  if (a.is_const()) {
    if (a.value.isBool()) return at::kBool;
    if (a.value.isInt()) return at::kLong;
    if (a.value.isDouble()) return at::kDouble;
    if (a.value.isTensor()) return parse_dtype(c10::toString(a.value.toTensor().scalar_type()));
    return std::nullopt;
  }
  if (!a.is_node()) return std::nullopt;
  for (const char* key : {"dtype", "traced_dtype"}) {
    auto it = a.node->meta().find(key);
    if (it != a.node->meta().end() && it->second.isString()) return parse_dtype(it->second.toStringRef());
  }
  return std::nullopt;
}

at::ScalarType Exporter::promoted(const fx::Node& n, size_t from, size_t to) {
  at::native::ResultTypeState state{};
  for (size_t i = from; i < to && i < n.args().size(); ++i) {
    const fx::Argument& a = n.args()[i];
    const std::optional<at::ScalarType> t = dtype_of(a);
    if (!t) return at::kFloat;
    if (a.is_const() && !a.value.isTensor()) {  // a Python number: a wrapped scalar
      const at::Scalar s = *t == at::kBool ? at::Scalar(true) : *t == at::kLong ? at::Scalar(int64_t{1}) : at::Scalar(1.0);
      state = at::native::update_result_type_state(s, state);
      continue;
    }
    const bool zero_d = a.is_node() && dims_.count(a.node) && dims_.at(a.node).empty();
    state = at::native::update_result_type_state(zero_d ? at::scalar_tensor(1, *t) : at::ones({1}, *t), state);
  }
  const at::ScalarType r = at::native::result_type(state);
  return r == at::kDouble || r == at::kHalf || r == at::kBFloat16 ? at::kFloat : r;
}

std::string Exporter::operand_as(const fx::Node& n, const fx::Argument& a, at::ScalarType t) {
  if (a.is_const() && (a.value.isDouble() || a.value.isInt() || a.value.isBool())) {
    const double v = a.value.isDouble() ? a.value.toDouble() : a.value.isInt() ? static_cast<double>(a.value.toInt()) : a.value.toBool();
    return init("scalar", at::full({}, v, at::TensorOptions().dtype(t)));
  }
  const std::string x = operand(n, a);
  const std::optional<at::ScalarType> have = dtype_of(a);
  if (!have || *have == t || (a.is_const() && a.value.isTensor())) return x;
  const int to = onnx_type(t);
  if (to < 0) unsupported(n, std::string("a cast to ") + c10::toString(t) + ", which the exported model cannot hold");
  const std::string y = fresh(n.name() + "_cast");
  const OpRecord* record = emitting_;
  emitting_ = nullptr;  // a conversion of the core, whatever record emits the op
  attr_i(node("Cast", {x}, y, y), "to", to);
  emitting_ = record;
  return y;
}

std::string Exporter::input_in_dtype(const fx::Node& n) {
  for (const auto& [k, a] : n.kwargs())
    if (k == "dtype" && a.is_const() && a.value.isInt()) {
      at::ScalarType t = static_cast<at::ScalarType>(a.value.toInt());
      if (t == at::kDouble || t == at::kHalf || t == at::kBFloat16) t = at::kFloat;
      return operand_as(n, n.args().at(0), t);
    }
  return value(n, n.args().at(0));
}

}  // namespace qfx::quant::detail
