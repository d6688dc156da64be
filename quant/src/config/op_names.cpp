#include "qfx/quant/op_names.h"

#include <cctype>

#include "qfx/fx/module_matcher.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/op_catalog.h"

namespace qfx::quant {
namespace {

bool const_equals(const fx::Node& n, size_t i, double v) {
  if (n.args().size() <= i || !n.args()[i].is_const()) return false;
  const auto& c = n.args()[i].value;
  return (c.isDouble() && c.toDouble() == v) || (c.isInt() && static_cast<double>(c.toInt()) == v);
}

}  // namespace

std::string node_module_path(const fx::Node& n) {
  if (n.op() == fx::Opcode::kCallModule) return n.target();
  auto it = n.meta().find("module_path");
  return it != n.meta().end() && it->second.isString() ? it->second.toStringRef() : std::string();
}

std::string node_object_type(const fx::Node& n, const fx::GraphModule& gm) {
  if (n.op() == fx::Opcode::kCallModule) {
    return fx::module_type_name(n, gm);  // the original class (meta), also after fusion
  }
  return canonical_op_name(n, gm);
}

std::string canonical_op_name(const fx::Node& n, const fx::GraphModule& gm) {
  switch (n.op()) {
    case fx::Opcode::kPlaceholder:
    case fx::Opcode::kGetAttr:
    case fx::Opcode::kOutput:
      return "";
    case fx::Opcode::kCallMethod:
      return "wrapped";
    case fx::Opcode::kCallModule: {
      auto m = gm.get_submodule(n.target());
      if (auto* f = dynamic_cast<FusedConvLinear*>(m.get())) return f->base_op();
      if (dynamic_cast<FakeQuantize*>(m.get()) || dynamic_cast<ObserverBase*>(m.get())) return "fake_quantize";
      const std::string cls = fx::module_type_name(n, gm);
      const std::string known = op_catalog().name_of_module(cls);
      if (!known.empty()) return known;
      std::string lower;
      for (char c : cls) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return lower.empty() ? "wrapped" : lower;
    }
    case fx::Opcode::kCallFunction:
      break;
  }
  const std::string& t = n.target();
  if (t == "getitem") return "getitem";
  if (t.rfind("aten::", 0) != 0) return "wrapped";  // custom ops, wrapped functions
  std::string name = t.substr(6);
  const auto dot = name.find('.');
  if (dot != std::string::npos) name.resize(dot);
  if (name.size() > 1 && name.back() == '_' && name[name.size() - 2] != '_') name.pop_back();
  if (name == "hardtanh" && const_equals(n, 1, 0.0) && const_equals(n, 2, 6.0)) return "relu6";
  const std::string known = op_catalog().name_of_aten(name);
  return known.empty() ? name : known;
}

bool is_recurrent_op(const std::string& op) {
  const OpRecord* r = op_catalog().find(op);
  return r && r->recurrent;
}

bool read_by_recurrent_only(const fx::Node& n, const fx::GraphModule& gm) {
  if (n.users().empty()) return false;
  for (const fx::Node* u : n.users())
    if (!is_recurrent_op(canonical_op_name(*u, gm))) return false;
  return true;
}

bool produces_tensor(const fx::Node& n) {
  auto it = n.meta().find("is_tensor");
  if (it != n.meta().end() && it->second.isBool()) return it->second.toBool();
  return n.op() == fx::Opcode::kCallModule;
}

}  // namespace qfx::quant
