// TorchScript type names and hyper-parameters of torch.nn modules (see script_args.h).
#include "script_args.h"

#include <cctype>

#include "qfx/error.h"

namespace qfx::fx::detail {

using c10::IValue;

std::string demangle_type(const std::string& qualified_name) {
  // Drop every "___torch_mangle_<digits>." (a scan: type names come from model files).
  static const std::string mangle = "___torch_mangle_";
  std::string s;
  size_t i = 0;
  while (i < qualified_name.size()) {
    const size_t at = qualified_name.find(mangle, i);
    if (at == std::string::npos) break;
    size_t j = at + mangle.size();
    while (j < qualified_name.size() && std::isdigit(static_cast<unsigned char>(qualified_name[j]))) ++j;
    const bool whole = j > at + mangle.size() && j < qualified_name.size() && qualified_name[j] == '.';
    s.append(qualified_name, i, (whole ? at : j) - i);
    i = whole ? j + 1 : j;
  }
  s.append(qualified_name, i, std::string::npos);
  const std::string prefix = "__torch__.";
  if (s.rfind(prefix, 0) == 0) s = s.substr(prefix.size());
  return s;
}

std::string short_type(const std::string& qualified_name) {
  std::string s = demangle_type(qualified_name);
  auto dot = s.rfind('.');
  return dot == std::string::npos ? s : s.substr(dot + 1);
}

ScriptReader::ScriptReader(torch::jit::Module& sm) : sm_(sm) {
  auto graph = sm.get_method("forward").graph();
  for (torch::jit::Node* n : graph->nodes()) {
    auto k = n->kind();
    if (k == c10::prim::Constant || k == c10::prim::GetAttr || k == c10::prim::ListConstruct ||
        k == c10::prim::TupleConstruct) {
      continue;
    }
    ops_.push_back(n);
  }
}

bool ScriptReader::scripted() const { return sm_.type()->numConstants() > 0; }

std::optional<IValue> ScriptReader::constant(const std::string& name) const {
  if (sm_.type()->findConstantSlot(name)) return sm_.type()->getConstant(name);
  if (sm_.hasattr(name)) {
    IValue v = sm_.attr(name);
    if (!v.isModule() && !v.isTensor()) return v;
  }
  return std::nullopt;
}

torch::jit::Node* ScriptReader::op(const std::vector<std::string>& kinds) const {
  if (ops_.size() != 1) return nullptr;
  for (const std::string& k : kinds) {
    if (ops_[0]->kind().toQualString() == k) return ops_[0];
  }
  return nullptr;
}

std::optional<IValue> ScriptReader::param(const char* constant_name, const std::vector<std::string>& ops,
                                          size_t index) const {
  if (auto c = constant(constant_name)) return c;
  if (auto* n = op(ops)) return input(n, index);
  return std::nullopt;
}

std::optional<IValue> ScriptReader::input(torch::jit::Node* n, size_t i) {
  if (i >= n->inputs().size()) return std::nullopt;
  torch::jit::Value* v = n->input(i);
  if (auto c = torch::jit::toIValue(v)) return c;
  if (v->node()->kind() == c10::prim::ListConstruct) {
    auto elem = v->type()->expect<c10::ListType>()->getElementType();
    c10::impl::GenericList list(elem);
    for (auto* in : v->node()->inputs()) {
      auto c = torch::jit::toIValue(in);
      if (!c) return std::nullopt;
      list.push_back(*c);
    }
    return IValue(list);
  }
  return std::nullopt;
}

bool ScriptReader::has_tensor(const std::string& name) const { return sm_.hasattr(name) && sm_.attr(name).isTensor(); }

at::Tensor ScriptReader::tensor(const std::string& name) const { return sm_.attr(name).toTensor(); }

void ScriptReader::tie(const std::string& name, at::Tensor& native) const {
  if (!sm_.hasattr(name)) return;
  IValue v = sm_.attr(name);
  if (!v.isTensor() || !native.defined()) return;
  at::Tensor src = v.toTensor();
  {
    at::NoGradGuard ng;
    native.set_data(src);
  }
  if (native.is_leaf()) native.requires_grad_(src.requires_grad());
  sm_.setattr(name, native);
}

std::vector<int64_t> script_ints(const IValue& v, size_t n) {
  std::vector<int64_t> out;
  if (v.isInt()) {
    out.assign(n, v.toInt());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) out.push_back(e.toInt());
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) out.push_back(e.toInt());
  }
  if (out.size() == 1 && n > 1) out.assign(n, out[0]);
  if (out.size() != n) throw TraceError("unexpected hyper-parameter shape");
  return out;
}

}  // namespace qfx::fx::detail
