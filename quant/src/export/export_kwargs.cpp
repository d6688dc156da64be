// Keyword arguments of call_function nodes: those an op's emission does not read
// must sit at the operator schema's default (torch.export writes keyword-only
// arguments such as add's alpha or div's rounding_mode as kwargs), so an ignored
// argument never changes the exported model's result.
#include <ATen/core/dispatch/Dispatcher.h>

#include <set>

#include "exporter.h"

namespace qfx::quant::detail {
namespace {

// The schema of target "aten::div.Tensor_mode" ("aten::relu": the default overload),
// or null when no loaded library registers it.
const c10::FunctionSchema* schema_of(const std::string& target) {
  const size_t dot = target.find('.');
  const std::string name = target.substr(0, dot), overload = dot == std::string::npos ? "" : target.substr(dot + 1);
  auto h = c10::Dispatcher::singleton().findSchema({name, overload == "default" ? "" : overload});
  return h ? &h->schema() : nullptr;
}

// Whether constant `v` equals the schema default `d` (numbers by value: 1 == 1.0).
bool same_value(const c10::IValue& v, const c10::IValue& d) {
  if (v.isNone() || d.isNone()) return v.isNone() && d.isNone();
  if ((v.isInt() || v.isDouble() || v.isBool()) && (d.isInt() || d.isDouble() || d.isBool()))
    return (v.isDouble() ? v.toDouble() : v.isInt() ? static_cast<double>(v.toInt()) : v.toBool()) ==
           (d.isDouble() ? d.toDouble() : d.isInt() ? static_cast<double>(d.toInt()) : d.toBool());
  if (v.isString() && d.isString()) return v.toStringRef() == d.toStringRef();
  if (v.isIntList() && d.isIntList()) return v.toIntVector() == d.toIntVector();
  return false;
}

}  // namespace

void Exporter::check_kwargs(const fx::Node& n, const OpRecord* r) {
  static const std::set<std::string> placement = {"device", "layout", "pin_memory", "memory_format", "non_blocking"};
  const c10::FunctionSchema* s = n.kwargs().empty() ? nullptr : schema_of(n.target());
  for (const auto& [key, a] : n.kwargs()) {
    if (placement.count(key) || (r && std::find(r->kwargs.begin(), r->kwargs.end(), key) != r->kwargs.end())) continue;
    std::optional<c10::IValue> def;
    if (s)
      for (const auto& arg : s->arguments())
        if (arg.name() == key) def = arg.default_value();
    if (a.is_const() && def && same_value(a.value, *def)) continue;
    unsupported(n, "keyword argument '" + key + "' at a value other than its default has no ONNX export in qfx yet");
  }
}

}  // namespace qfx::quant::detail
