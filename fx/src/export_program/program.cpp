// load_exported_program: an exported program's serialized graph as qfx's fx
// GraphModule (placeholders, get_attr, call_function over aten overloads,
// rebuilt torch.nn layers as call_module, output).
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <cstdio>

#include <limits>
#include <map>
#include <set>

#include "archive.h"
#include "subgraph.h"
#include "../leaves/registry.h"
#include "qfx/error.h"
#include "qfx/fx/decompositions.h"
#include "qfx/fx/exported_program.h"
#include "qfx/fx/op_libraries.h"

namespace qfx::fx {
namespace detail {
namespace {
using nlohmann::json;

// "torch.ops.aten.add.Tensor" -> "aten::add.Tensor", "torch.ops.aten.relu.default"
// -> "aten::relu"; Python's int arithmetic on sizes -> the TorchScript int ops.
std::string operator_name(const std::string& target, const std::string& node) {
  static const std::map<std::string, std::string> python_ops = {
      {"_operator.add", "aten::add.int"},   {"_operator.sub", "aten::sub.int"},   {"_operator.mul", "aten::mul.int"},
      {"_operator.floordiv", "aten::floordiv.int"}, {"_operator.neg", "aten::neg.int"}, {"_operator.mod", "aten::remainder.int"},
      {"_operator.truediv", "aten::div.int"}, {"_operator.eq", "aten::eq.int"}, {"_operator.ne", "aten::ne.int"},
      {"_operator.ge", "aten::ge.int"},     {"_operator.gt", "aten::gt.int"},     {"_operator.le", "aten::le.int"},
      {"_operator.lt", "aten::lt.int"},     {"_operator.and_", "aten::__and__.bool"}, {"_operator.or_", "aten::__or__.bool"},
      {"_operator.not_", "aten::__not__"},  {"torch.sym_max", "prim::max.int"},   {"torch.sym_min", "prim::min.int"},
      {"_operator.getitem", "getitem"}};
  if (auto it = python_ops.find(target); it != python_ops.end()) return it->second;
  const std::string prefix = "torch.ops.";
  if (target.rfind(prefix, 0) != 0)
    throw UnsupportedOpError("node " + node + ": call target '" + target + "' is not an operator (torch.ops.*)");
  const std::string rest = target.substr(prefix.size());
  const auto a = rest.find('.'), b = rest.rfind('.');
  if (a == std::string::npos || a == b) throw UnsupportedOpError("node " + node + ": cannot read the operator name '" + target + "'");
  const std::string ns = rest.substr(0, a), op = rest.substr(a + 1, b - a - 1), overload = rest.substr(b + 1);
  if (ns == "higher_order")
    throw UnsupportedOpError("node " + node + ": control flow (" + target +
                             ") holds subgraphs; qfx quantizes one graph: export the branch the deployment takes");
  return ns + "::" + op + (overload == "default" ? "" : "." + overload);
}

// The innermost nn_module_stack entry of a node: its module path and class.
struct ModuleFrame {
  std::string path, cls;  // "layer1.0.conv1", "torch.nn.modules.conv.Conv2d"
};
ModuleFrame innermost_module(const json& node) {
  const auto meta = node.find("metadata");
  if (meta == node.end() || !meta->contains("nn_module_stack")) return {};
  const std::string stack = meta->at("nn_module_stack").get<std::string>();
  const std::string last = stack.substr(stack.rfind(';') == std::string::npos ? 0 : stack.rfind(';') + 1);
  const auto c1 = last.find(','), c2 = last.rfind(',');
  if (c1 == std::string::npos || c1 == c2) return {};
  return {last.substr(c1 + 1, c2 - c1 - 1), last.substr(c2 + 1)};
}

std::string short_class(const std::string& cls) {
  return cls.rfind("torch.nn.modules.", 0) == 0 ? cls.substr(cls.rfind('.') + 1) : std::string();
}

class ProgramBuilder {
 public:
  ProgramBuilder(const ExportedArchive& a, const ExportedProgramOptions& o)
      : a_(a), o_(o), gm_(std::make_shared<GraphModule>()), g_(gm_->graph()) {}

  std::shared_ptr<GraphModule> build() {
    const json& gmj = a_.model.at("graph_module");
    const json& graph = gmj.at("graph");
    inputs(gmj.at("signature"), graph);
    count_uses(graph);
    for (const auto& n : graph.at("nodes")) node(n);
    outputs(gmj.at("signature"), graph);
    decompose_attention(*gm_);  // each matmul and the softmax quantized, as the TorchScript tracer gives them
    simplify_arange_index(*gm_);  // transformers' mask builders index with full aranges
    addmm_as_linear(*gm_);        // addmm / mm with a parameter quantize as linear
    mask_add_as_masked_fill(*gm_);  // additive -inf masks: no observer sees -inf
    g_.eliminate_dead_code();     // their unused aranges and size checks
    gm_->eval();
    return gm_;
  }

 private:
  struct Lifted {
    std::string fqn;
    at::Tensor tensor;
    bool buffer = false;
  };

  // Graph inputs, by the signature: user inputs become placeholders; parameters,
  // buffers and constants are read where they are used.
  void inputs(const json& sig, const json& graph) {
    for (const auto& spec : sig.at("input_specs")) {
      if (spec.contains("user_input")) {
        const json& arg = spec.at("user_input").at("arg");
        if (!arg.contains("as_tensor")) continue;  // a constant user input was specialised into the graph
        placeholder(arg.at("as_tensor").at("name").get<std::string>(), graph);
      } else if (spec.contains("parameter")) {
        lift(spec.at("parameter"), "parameter_name", a_.weights, false);
      } else if (spec.contains("buffer")) {
        const json& b = spec.at("buffer");
        lift(b, "buffer_name", b.value("persistent", true) ? a_.weights : a_.constants, true);
      } else if (spec.contains("tensor_constant")) {
        lift(spec.at("tensor_constant"), "tensor_constant_name", a_.constants, true);
      } else {
        throw UnsupportedOpError(a_.path + ": graph input " + spec.dump().substr(0, 120) +
                                 " is a custom object or effect token; qfx reads tensor programs");
      }
    }
  }

  void placeholder(const std::string& name, const json&) {
    Node* p = g_.placeholder(name);
    p->meta()["is_tensor"] = true;
    shape_meta(name, p);
    env_[name] = p;
  }

  // meta["traced_shape"]: the value's sizes as the program recorded them (-1: symbolic);
  // meta["traced_dtype"]: its scalar type (c10's name: "Float", "Bool", "Long"), both
  // from the program's tensor_meta.
  void shape_meta(const std::string& value, Node* n) {
    const auto& top = a_.model.at("graph_module").at("graph").at("tensor_values");
    const json& tv = top.contains(value) ? top : sub_values_["tensor_values"];
    if (!tv.contains(value)) return;
    const json& meta = tv.at(value);
    std::vector<int64_t> shape;
    for (const auto& s : meta.at("sizes")) shape.push_back(static_int(s));
    n->meta()["traced_shape"] = c10::IValue(shape);
    n->meta()["traced_dims"] = dims_of(meta.at("sizes"));
    if (!meta.contains("dtype")) return;
    try {
      n->meta()["traced_dtype"] = std::string(c10::toString(scalar_type_of(meta.at("dtype").get<int64_t>(), value)));
    } catch (const IoError&) {  // a dtype qfx has no kernels for: the op that reads it says so
    }
  }

  // Each size as the program wrote it: "16", or a symbol's expression
  // ("Symbol('s43', positive=True, integer=True)"): equal strings, equal sizes.
  static c10::List<std::string> dims_of(const json& sizes) {
    c10::List<std::string> out;
    for (const auto& s : sizes) out.push_back(sym_text(s));
    return out;
  }
  static std::string sym_text(const json& s) {
    if (s.contains("as_int")) return std::to_string(s.at("as_int").get<int64_t>());
    if (s.contains("as_expr")) return s.at("as_expr").at("expr_str").get<std::string>();
    return "?";
  }

  void lift(const json& spec, const char* key, const std::map<std::string, at::Tensor>& from, bool buffer) {
    const std::string name = spec.at("arg").at("name").get<std::string>(), fqn = spec.at(key).get<std::string>();
    auto it = from.find(fqn);
    if (it == from.end()) throw IoError(a_.path + ": tensor '" + fqn + "' (graph input " + name + ") is missing from the archive");
    at::Tensor t = it->second;
    if (!buffer && t.is_floating_point()) t.requires_grad_(true);  // a parameter: trainable (QAT)
    lifted_[name] = {fqn, t, buffer};
  }

  void count_uses(const json& graph) {
    for (const auto& n : graph.at("nodes"))
      for (const auto& in : n.at("inputs")) for_each_name(in.at("arg"), [&](const std::string& v) { ++uses_[v]; });
    for (const auto& o : graph.at("outputs")) for_each_name(o, [&](const std::string& v) { ++uses_[v]; });
  }

  template <typename Fn>
  static void for_each_name(const json& arg, Fn&& fn) {
    for (const char* k : {"as_tensor", "as_sym_int", "as_sym_float", "as_sym_bool"})
      if (arg.contains(k) && arg.at(k).contains("name")) fn(arg.at(k).at("name").get<std::string>());
      else if (arg.contains(k) && arg.at(k).contains("as_name")) fn(arg.at(k).at("as_name").get<std::string>());
    for (const char* k : {"as_tensors", "as_sym_ints", "as_optional_tensors", "as_sym_floats", "as_sym_bools"})
      if (arg.contains(k))
        for (const auto& e : arg.at(k)) {
          if (e.contains("name")) fn(e.at("name").get<std::string>());
          if (e.contains("as_name")) fn(e.at("as_name").get<std::string>());
          if (e.contains("as_tensor")) fn(e.at("as_tensor").at("name").get<std::string>());
        }
    if (arg.contains("as_optional_tensor") && arg.at("as_optional_tensor").contains("as_tensor"))
      fn(arg.at("as_optional_tensor").at("as_tensor").at("name").get<std::string>());
  }

  // The node that holds value `name`: computed, a placeholder, or a lifted tensor
  // read through get_attr (registered at its dotted name on first use).
  Node* value(const std::string& name, const std::string& user) {
    if (auto it = env_.find(name); it != env_.end()) return it->second;
    auto l = lifted_.find(name);
    if (l == lifted_.end()) throw IoError(a_.path + ": node " + user + " reads '" + name + "', which no node computes");
    if (!gm_->has_attr(l->second.fqn)) gm_->add_tensor(l->second.fqn, l->second.tensor, l->second.buffer);
    Node* ga = g_.get_attr(l->second.fqn, l->second.fqn);
    ga->meta()["module_path"] = std::string();
    ga->meta()["is_tensor"] = true;
    return env_[name] = ga;
  }

  Argument sym_list(const json& items, const std::string& user) {
    std::vector<Argument> a;
    bool all_const = true;
    std::vector<int64_t> ints;
    for (const auto& e : items) {
      if (e.contains("as_name")) {
        a.emplace_back(value(e.at("as_name").get<std::string>(), user));
        all_const = false;
      } else {
        ints.push_back(e.at("as_int").get<int64_t>());
        a.emplace_back(c10::IValue(ints.back()));
      }
    }
    if (all_const) return Argument(c10::IValue(ints));
    return Argument::list(std::move(a), c10::IntType::get());
  }

  Argument optional_tensors(const json& items, const std::string& user) {
    std::vector<Argument> a;
    for (const auto& e : items)
      a.push_back(e.contains("as_tensor") ? Argument(value(e.at("as_tensor").at("name").get<std::string>(), user)) : Argument());
    return Argument::list(std::move(a), c10::OptionalType::create(c10::TensorType::get()));
  }

  Argument argument(const json& arg, const std::string& user) {
    if (arg.contains("as_none")) return Argument();
    if (arg.contains("as_tensor")) return Argument(value(arg.at("as_tensor").at("name").get<std::string>(), user));
    if (arg.contains("as_tensors")) {
      std::vector<Argument> a;
      for (const auto& e : arg.at("as_tensors")) a.emplace_back(value(e.at("name").get<std::string>(), user));
      return Argument::list(std::move(a), c10::TensorType::get());
    }
    if (arg.contains("as_optional_tensors")) return optional_tensors(arg.at("as_optional_tensors"), user);
    if (arg.contains("as_optional_tensor"))
      return arg.at("as_optional_tensor").contains("as_tensor")
                 ? Argument(value(arg.at("as_optional_tensor").at("as_tensor").at("name").get<std::string>(), user))
                 : Argument();
    if (arg.contains("as_int")) return Argument(c10::IValue(arg.at("as_int").get<int64_t>()));
    if (arg.contains("as_float")) return Argument(c10::IValue(float_of(arg.at("as_float"))));
    if (arg.contains("as_bool")) return Argument(c10::IValue(arg.at("as_bool").get<bool>()));
    if (arg.contains("as_string")) return Argument(c10::IValue(arg.at("as_string").get<std::string>()));
    if (arg.contains("as_ints")) return Argument(c10::IValue(arg.at("as_ints").get<std::vector<int64_t>>()));
    if (arg.contains("as_floats")) {
      std::vector<double> v;
      for (const auto& f : arg.at("as_floats")) v.push_back(float_of(f));
      return Argument(c10::IValue(v));
    }
    if (arg.contains("as_bools")) {
      c10::List<bool> l;
      for (const auto& b : arg.at("as_bools")) l.push_back(b.get<bool>());
      return Argument(c10::IValue(l));
    }
    if (arg.contains("as_strings")) return Argument(c10::IValue(arg.at("as_strings").get<std::vector<std::string>>()));
    if (arg.contains("as_sym_int") || arg.contains("as_sym_float") || arg.contains("as_sym_bool")) {
      const json& s = arg.contains("as_sym_int") ? arg.at("as_sym_int") : arg.contains("as_sym_float") ? arg.at("as_sym_float") : arg.at("as_sym_bool");
      if (s.contains("as_name")) return Argument(value(s.at("as_name").get<std::string>(), user));
      for (const char* k : {"as_int", "as_float", "as_bool"})
        if (s.contains(k)) return argument(json{{k, s.at(k)}}, user);
    }
    if (arg.contains("as_sym_ints")) return sym_list(arg.at("as_sym_ints"), user);
    if (arg.contains("as_scalar_type"))
      return Argument(c10::IValue(static_cast<int64_t>(scalar_type_of(arg.at("as_scalar_type").get<int64_t>(), "node " + user))));
    if (arg.contains("as_memory_format")) return Argument(c10::IValue(memory_format(arg.at("as_memory_format").get<int64_t>())));
    if (arg.contains("as_layout")) return Argument(c10::IValue(static_cast<int64_t>(c10::kStrided)));
    if (arg.contains("as_device")) return Argument(c10::IValue(c10::Device(arg.at("as_device").at("type").get<std::string>())));
    throw UnsupportedOpError("node " + user + ": argument " + arg.dump().substr(0, 80) +
                             " (a subgraph, custom object or complex value) is not supported");
  }

  // A float as torch's serializer writes it: a number, or "Infinity", "-Infinity",
  // "NaN" (JSON has no literal for them; the SDPA decomposition's -inf is one).
  static double float_of(const json& f) {
    if (f.is_number()) return f.get<double>();
    const std::string s = f.get<std::string>();
    if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
    throw IoError("a float written as '" + s + "'");
  }

  static int64_t memory_format(int64_t code) {
    switch (code) {  // schema: 1 contiguous, 2 channels_last, 3 channels_last_3d, 4 preserve
      case 2: return static_cast<int64_t>(c10::MemoryFormat::ChannelsLast);
      case 3: return static_cast<int64_t>(c10::MemoryFormat::ChannelsLast3d);
      case 4: return static_cast<int64_t>(c10::MemoryFormat::Preserve);
      default: return static_cast<int64_t>(c10::MemoryFormat::Contiguous);
    }
  }

  // The rank of the program value `value`, -1 when its tensor_meta is not recorded.
  int64_t rank_of(const std::string& value) const {
    const auto& tv = a_.model.at("graph_module").at("graph").at("tensor_values");
    return tv.contains(value) ? static_cast<int64_t>(tv.at(value).at("sizes").size()) : -1;
  }

  // The layer class a functional call inside a module of another class is (timm's
  // BatchNormAct2d calls F.batch_norm on its own weight, a custom block calls
  // F.conv2d on its own parameters): by the target and the input's rank; "" for none.
  std::string functional_layer(const json& n, const std::string& target) const {
    const auto dot = target.find('.');
    const std::string op = target.substr(0, dot);
    if (op == "aten::conv1d" || op == "aten::conv2d" || op == "aten::conv3d") return "Conv" + op.substr(10, 2);
    if (op == "aten::linear") return "Linear";
    if (op == "aten::layer_norm" || op == "aten::native_layer_norm") return "LayerNorm";
    const json& x = n.at("inputs").at(0).at("arg");
    const int64_t r = x.contains("as_tensor") ? rank_of(x.at("as_tensor").at("name").get<std::string>()) : -1;
    if (op == "aten::convolution") return r >= 3 && r <= 5 ? "Conv" + std::to_string(r - 2) + "d" : "";
    if (op != "aten::batch_norm" && op != "aten::_native_batch_norm_legit_no_training") return "";
    return r == 2 || r == 3 ? "BatchNorm1d" : r == 4 ? "BatchNorm2d" : r == 5 ? "BatchNorm3d" : "";
  }

  // A standard layer rebuilt as a module, when the node is one and owns its tensors:
  // called by its own class (at the module's path), or as a function on tensors of the
  // module it sits in (at a child path named after the layer: "bn1.bn" for timm's
  // BatchNormAct2d "bn1", whose own children, "bn1.act", stay its siblings).
  Node* leaf(const json& n, const std::string& target, const std::string& name) {
    if (!o_.rebuild_modules) return nullptr;
    const ModuleFrame f = innermost_module(n);
    std::string cls = short_class(f.cls);  // "" for a class outside torch.nn (timm's BatchNormAct2d)
    if (f.path.empty()) return nullptr;
    std::string at = f.path;
    if (leaf_tensor_names(cls).empty() && !rebuilt_.count(f.path)) {
      const std::string functional = functional_layer(n, target);
      if (!functional.empty()) {
        cls = functional;
        at = f.path + (cls.rfind("Conv", 0) == 0 ? ".conv" : cls.rfind("BatchNorm", 0) == 0 ? ".bn" : cls == "Linear" ? ".linear" : ".norm");
      }
    }
    if (cls.empty()) return nullptr;
    LeafArgs args{n, [&](const std::string& v) {
                    auto it = lifted_.find(v);
                    return it == lifted_.end() ? at::Tensor() : it->second.tensor;
                  }};
    // The module's tensors must be its own (named path.weight, ...) and read by this node alone.
    for (const auto& suffix : leaf_tensor_names(cls)) {
      const json* a = args.arg(suffix);
      if (!a || !a->contains("as_tensor")) continue;
      const std::string v = a->at("as_tensor").at("name").get<std::string>();
      auto it = lifted_.find(v);
      if (it == lifted_.end() || it->second.fqn != f.path + "." + suffix || uses_[v] != 1) return nullptr;
    }
    auto rebuilt = rebuilt_.find(at);
    if (rebuilt != rebuilt_.end()) {  // a layer called again: parameter-free ones are shared, as in PyTorch
      if (rebuilt->second != cls || !leaf_tensor_names(cls).empty()) return nullptr;
    } else {
      if (gm_->get_submodule(at)) return nullptr;  // a container already holds tensors there
      auto m = rebuild_leaf(cls, target, args);
      if (!m) return nullptr;
      gm_->add_submodule(at, m->module, m->fn);
      rebuilt_[at] = cls;
    }
    Node* x = value(n.at("inputs").at(0).at("arg").at("as_tensor").at("name").get<std::string>(), name);
    Node* c = g_.call_module(at, {Argument(x)}, {}, at);
    c->meta()["module_type"] = cls;
    return c;
  }

  // A training-mode program updates batch-norm statistics and counters in place:
  // nothing to deploy.
  void refuse_training(const json& n, const std::string& target, const std::string& name) {
    const std::string eval = "; export the model in eval mode (model.eval() before torch.export.export)";
    if (target == "aten::batch_norm" || target == "aten::_native_batch_norm_legit" || target == "aten::_native_batch_norm_legit_functional")
      for (const auto& in : n.at("inputs"))
        if (in.at("name") == "training" && in.at("arg").value("as_bool", false))
          throw UnsupportedOpError(a_.path + ": node " + name + ": batch norm in training mode (batch statistics)" + eval);
    const auto dot = target.find('.'), end = dot == std::string::npos ? target.size() : dot;
    if (end > 0 && target[end - 1] == '_' && !n.at("inputs").empty()) {
      const json& self = n.at("inputs").at(0).at("arg");
      if (self.contains("as_tensor")) {
        auto l = lifted_.find(self.at("as_tensor").at("name").get<std::string>());
        if (l != lifted_.end())
          throw UnsupportedOpError(a_.path + ": node " + name + ": " + target + " writes " + l->second.fqn + " in place" + eval);
      }
    }
  }

  void node(const json& n) {
    const std::string name = n.contains("name") && n.at("name").is_string() ? n.at("name").get<std::string>() : "node";
    if (n.at("target").get<std::string>() == "torch.ops.higher_order.wrap_with_autocast") return autocast_region(n, name);
    const std::string target = operator_name(n.at("target").get<std::string>(), name);
    // Run-time checks torch.export records (a cast's dtype and device, a symbolic
    // size's range) return nothing: the graph is the same without them.
    if (target.rfind("aten::_assert", 0) == 0 || target.rfind("aten::sym_constrain_range", 0) == 0) return;
    refuse_training(n, target, name);
    Node* fxn = leaf(n, target, name);
    if (!fxn) fxn = call(n, target, name);
    fxn->meta()["module_path"] = innermost_module(n).path;
    bind_outputs(n.at("outputs"), fxn);
  }

  // wrap_with_autocast(device_type, dtype, enabled, cache_enabled, subgraph, *operands)
  // (a `with torch.autocast(...)` block): with enabled False, what the block computes
  // in the dtypes it was written in, so its nodes are read into this graph (values
  // renamed into their own scope) and its outputs become the node's. Enabled autocast
  // computes in a lower precision qfx does not simulate: refused.
  void autocast_region(const json& n, const std::string& name) {
    const json& in = n.at("inputs");
    if (in.size() < 5 || !in[4].at("arg").contains("as_graph"))
      throw IoError(a_.path + ": node " + name + ": wrap_with_autocast without its subgraph");
    if (!in[2].at("arg").contains("as_bool") || in[2].at("arg").at("as_bool").get<bool>())
      throw UnsupportedOpError(a_.path + ": node " + name + " (wrap_with_autocast): an enabled torch.autocast region computes in reduced precision; "
                               "export the model without autocast (qfx quantizes the float32 model)");
    const std::string prefix = name + "__";
    const json sub = scoped_subgraph(in[4].at("arg").at("as_graph").at("graph"), prefix);
    const json& sub_in = sub.at("inputs");
    if (sub_in.size() != in.size() - 5)
      throw IoError(a_.path + ": node " + name + ": " + std::to_string(in.size() - 5) + " operands for a subgraph of " +
                    std::to_string(sub_in.size()) + " inputs");
    for (size_t i = 0; i < sub_in.size(); ++i) {
      const json& operand = in[i + 5].at("arg");
      if (!operand.contains("as_tensor") || !sub_in[i].contains("as_tensor"))
        throw UnsupportedOpError(a_.path + ": node " + name + ": a non-tensor operand of an autocast region");
      env_[sub_in[i].at("as_tensor").at("name").get<std::string>()] = value(operand.at("as_tensor").at("name").get<std::string>(), name);
    }
    for (const char* k : {"tensor_values", "sym_int_values"})
      if (sub.contains(k)) sub_values_[k].update(sub.at(k));
    count_uses(sub);
    for (const auto& s : sub.at("nodes")) node(s);
    const json& outs = n.at("outputs").size() == 1 && n.at("outputs")[0].contains("as_tensors") ? n.at("outputs")[0].at("as_tensors")
                                                                                                  : n.at("outputs");
    const json& sub_out = sub.at("outputs");
    for (size_t i = 0; i < outs.size() && i < sub_out.size(); ++i) {
      const json& o = outs[i].contains("as_tensor") ? outs[i].at("as_tensor") : outs[i];
      if (!o.contains("name") || !sub_out[i].contains("as_tensor")) continue;
      env_[o.at("name").get<std::string>()] = value(sub_out[i].at("as_tensor").at("name").get<std::string>(), name);
    }
  }

  Node* call(const json& n, const std::string& target, const std::string& name) {
    if (target != "getitem") check_registered(target, name);
    std::vector<Argument> args;
    std::vector<std::pair<std::string, Argument>> kwargs;
    for (const auto& in : n.at("inputs")) {
      Argument a = argument(in.at("arg"), name);
      if (in.value("kind", 1) == 2) kwargs.emplace_back(in.at("name").get<std::string>(), std::move(a));
      else args.push_back(std::move(a));
    }
    return g_.call_function(target, std::move(args), std::move(kwargs), name);
  }

  void check_registered(const std::string& target, const std::string& name) {
    const auto sep = target.find("::"), dot = target.find('.', sep);
    c10::OperatorName op(target.substr(0, dot), dot == std::string::npos ? "" : target.substr(dot + 1));
    // torchvision's operators (nms, roi_align) load on demand, as for TorchScript files.
    if (!torch::jit::findOperatorFor(op) && target.rfind("torchvision::", 0) == 0) load_torchvision_operators();
    if (!torch::jit::findOperatorFor(op))
      throw UnsupportedOpError(a_.path + ": node " + name + ": no loaded library registers operator '" + target +
                               "' (a custom op: load its library with model.libraries / --library)");
  }

  // Each output value of `fxn`: the node itself, or getitem nodes for tuples and lists.
  void bind_outputs(const json& outs, Node* fxn) {
    auto bind = [&](const std::string& v, Node* node, bool tensor) {
      node->meta()["is_tensor"] = tensor;
      node->meta()["type"] = std::string(tensor ? "Tensor" : "int");
      if (tensor) shape_meta(v, node);
      const auto& top = a_.model.at("graph_module").at("graph").at("sym_int_values");
      const json& syms = top.contains(v) ? top : sub_values_["sym_int_values"];
      if (!tensor && syms.contains(v)) node->meta()["sym_expr"] = sym_text(syms.at(v));
      env_[v] = node;
    };
    auto name_of = [](const json& o, bool* tensor) -> std::string {
      *tensor = o.contains("as_tensor");
      if (o.contains("as_tensor")) return o.at("as_tensor").at("name").get<std::string>();
      for (const char* k : {"as_sym_int", "as_sym_float", "as_sym_bool"})
        if (o.contains(k) && o.at(k).contains("as_name")) return o.at(k).at("as_name").get<std::string>();
      return "";
    };
    if (outs.size() == 1 && !outs[0].contains("as_tensors")) {
      bool tensor = false;
      const std::string v = name_of(outs[0], &tensor);
      if (!v.empty()) bind(v, fxn, tensor);
      return;
    }
    const json& items = outs.size() == 1 ? outs[0].at("as_tensors") : outs;
    for (size_t i = 0; i < items.size(); ++i) {
      bool tensor = items[i].contains("name");
      const std::string v = tensor ? items[i].at("name").get<std::string>() : name_of(items[i], &tensor);
      if (v.empty() || !uses_[v]) continue;
      if (fxn->op() == Opcode::kCallModule) {  // a rebuilt batch norm: its other outputs are the saved statistics
        if (i == 0) bind(v, fxn, true);
        continue;
      }
      Node* gi = g_.call_function("getitem", {Argument(fxn), Argument(c10::IValue(static_cast<int64_t>(i)))}, {}, v);
      gi->meta()["module_path"] = fxn->meta()["module_path"];
      bind(v, gi, tensor);
    }
  }

  void outputs(const json& sig, const json& graph) {
    for (const auto& spec : sig.at("output_specs"))
      if (!spec.contains("user_output"))
        throw UnsupportedOpError(a_.path + ": the program also writes " + spec.begin().key() +
                                 " (a buffer or input it mutates: batch-norm statistics in training mode); export the model in eval mode");
    std::vector<Argument> outs;
    for (const auto& o : graph.at("outputs")) outs.push_back(argument(o, "output"));
    const std::vector<c10::IValue> keys = dict_output_keys(outs.size());
    const bool single = keys.empty() && (graph.value("is_single_tensor_return", false) || outs.size() == 1);
    Node* out = g_.output(single && outs.size() == 1 ? outs[0] : Argument::tuple(std::move(outs)));
    if (!keys.empty()) set_output_keys(out, keys);
  }

  // The keys when the program returns one flat dictionary of `n` values (its output
  // pytree spec, module_call_graph[0]: {"type": "builtins.dict" or
  // "collections.OrderedDict", "context": "[keys]"}); empty otherwise.
  std::vector<c10::IValue> dict_output_keys(size_t n) const {
    const json& gmj = a_.model.at("graph_module");
    if (!gmj.contains("module_call_graph") || gmj.at("module_call_graph").empty()) return {};
    const json& sig = gmj.at("module_call_graph").at(0).at("signature");
    if (!sig.contains("out_spec") || !sig.at("out_spec").is_string()) return {};
    const json spec = json::parse(sig.at("out_spec").get<std::string>(), nullptr, false);
    if (!spec.is_array() || spec.size() < 2 || !spec[1].is_object()) return {};
    const json& top = spec[1];
    const std::string type = top.value("type", json()).is_string() ? top.at("type").get<std::string>() : "";
    if (type != "builtins.dict" && type != "collections.OrderedDict") return {};
    const json ctx = json::parse(top.value("context", std::string("null")), nullptr, false);
    if (!ctx.is_array() || ctx.size() != n) return {};
    std::vector<c10::IValue> keys;
    for (const auto& k : ctx) {
      if (k.is_string()) keys.emplace_back(k.get<std::string>());
      else if (k.is_number_integer()) keys.emplace_back(k.get<int64_t>());
      else return {};
    }
    return keys;
  }

  const ExportedArchive& a_;
  const ExportedProgramOptions& o_;
  std::shared_ptr<GraphModule> gm_;
  Graph& g_;
  std::map<std::string, Node*> env_;
  std::map<std::string, Lifted> lifted_;
  std::map<std::string, int> uses_;
  json sub_values_ = {{"tensor_values", json::object()}, {"sym_int_values", json::object()}};  // of subgraphs read in
  std::map<std::string, std::string> rebuilt_;  // module path -> class of the layers rebuilt there
};

}  // namespace
}  // namespace detail

std::shared_ptr<GraphModule> load_exported_program(const std::string& path, const ExportedProgramOptions& options) {
  const detail::ExportedArchive a = detail::read_exported_archive(path);
  try {
    return detail::ProgramBuilder(a, options).build();
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path + ": the exported program's graph lacks a field qfx needs (" + std::string(e.what()) + ")");
  }
}

bool is_exported_program(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {0, 0, 0, 0};
  const size_t got = std::fread(magic, 1, 4, f);
  std::fclose(f);
  if (got != 4 || magic[0] != 'P' || magic[1] != 'K') return false;
  try {
    caffe2::serialize::PyTorchStreamReader r(path);
    for (const auto& rec : r.getAllRecords())
      if (detail::is_model_record(rec)) return true;
  } catch (...) {
  }
  return false;
}

}  // namespace qfx::fx
