// The tracer: running a traced graph, modules and attributes, wrap decisions,
// messages, C++ leaf patterns (see trace_impl.h).
#include "trace_impl.h"
#include "qfx/error.h"

namespace qfx::fx::detail {


void collect_model_wraps(const torch::jit::Module& m, std::vector<WrapSpec>& out) {
  auto add = [&](const IValue& v) {
    auto add_one = [&](const IValue& e) {
      if (e.isString()) out.push_back(WrapSpec::parse(e.toStringRef()));
    };
    if (v.isTuple()) for (const auto& e : v.toTupleRef().elements()) add_one(e);
    else if (v.isList()) for (const auto& e : v.toListRef()) add_one(e);
  };
  for (const auto& sub : m.modules()) {
    if (sub.type()->findConstantSlot("__qfx_wrap__")) add(sub.type()->getConstant("__qfx_wrap__"));
    if (sub.hasattr("__qfx_wrap__")) add(sub.attr("__qfx_wrap__"));
  }
}


std::shared_ptr<GraphModule> TraceImpl::run() {
  const bool training = root_.is_training();
  int root_idx = module_index(root_, "");
  auto method = root_.get_method("forward");
  const auto& schema = method.function().getSchema();
  auto graph = method.graph();
  std::vector<Sym> inputs;
  inputs.push_back(module_sym(root_idx));
  for (size_t i = 1; i < graph->inputs().size(); ++i) {
    std::string name = i < schema.arguments().size() ? schema.arguments()[i].name()
                                                      : strip_suffix(graph->inputs()[i]->debugName());
    Node* p = g_.placeholder(name, graph->inputs()[i]->type()->str());
    const bool tensor = graph->inputs()[i]->type()->kind() == c10::TypeKind::TensorType;
    p->meta()["is_tensor"] = tensor;
    Sym s = Sym::proxy(p);
    if (tensor && i - 1 < input_shapes_.size()) {  // shape specialisation (trace_shadow.cpp)
      const auto& shape = input_shapes_[i - 1];
      const std::string dtype = i - 1 < input_dtypes_.size() ? input_dtypes_[i - 1] : "float32";
      s.shadow = std::make_shared<std::array<IValue, 2>>(
          std::array<IValue, 2>{example_input(shape, 0, dtype), example_input(shape, 1, dtype)});
      std::vector<int64_t> traced(shape.begin(), shape.end());
      for (auto& d : traced) d = d < 0 ? -1 : d;
      p->meta()["traced_shape"] = IValue(traced);
    }
    inputs.push_back(s);
  }
  frames_.push_back({"", modules_[root_idx].type, "forward", ""});
  auto outs = run_graph(*graph, inputs);
  frames_.pop_back();
  Node* out = g_.output(outs.size() == 1 ? to_arg(outs[0], nullptr) : tuple_arg(outs));
  if (outs.size() == 1 && outs[0].k == Sym::K::kDict) set_output_keys(out, *outs[0].keys);

  // Parameters that only wrapped methods read still belong to the model.
  std::unordered_set<c10::TensorImpl*> have;
  for (const auto& p : gm_->named_parameters(true)) have.insert(p.value().unsafeGetTensorImpl());
  for (const auto& b : gm_->named_buffers(true)) have.insert(b.value().unsafeGetTensorImpl());
  for (const auto& owner : method_owners_) {
    for (const auto& p : owner.module.named_parameters(true)) {
      if (have.insert(p.value.unsafeGetTensorImpl()).second) gm_->add_tensor(join(owner.path, p.name), p.value, false);
    }
    for (const auto& b : owner.module.named_buffers(true)) {
      if (have.insert(b.value.unsafeGetTensorImpl()).second) gm_->add_tensor(join(owner.path, b.name), b.value, true);
    }
    torch::jit::Module m = owner.module;
    gm_->add_train_hook([m](bool on) mutable { m.train(on); });
  }
  gm_->train(training);
  decompose_attention(*gm_);
  g_.eliminate_dead_code();  // shape checks of assertions and other unused values
  g_.lint();
  return gm_;
}

int TraceImpl::module_index(const torch::jit::Module& m, const std::string& path) {
  auto it = module_by_path_.find(path);
  if (it != module_by_path_.end()) return it->second;
  modules_.push_back({m, path, detail::demangle_type(m.type()->name()->qualifiedName())});
  module_by_path_[path] = static_cast<int>(modules_.size()) - 1;
  return static_cast<int>(modules_.size()) - 1;
}

bool TraceImpl::name_matches(const std::string& spec, const std::string& qualified) const {
  if (spec == qualified) return true;
  auto dot = qualified.rfind('.');
  return dot != std::string::npos && spec == qualified.substr(dot + 1);
}

bool TraceImpl::wrapped_method(const std::string& path, const std::string& method) const {
  for (const auto& w : wraps_) {
    if (w.kind != WrapSpec::Kind::kMethod && w.kind != WrapSpec::Kind::kAny) continue;
    if (w.name == method || w.name == join(path, method)) return true;
  }
  return false;
}

bool TraceImpl::wrapped_module(const ModuleCtx& m) const {
  if (m.path.empty()) return false;
  for (const auto& w : wraps_) {
    const bool type_ok = w.kind == WrapSpec::Kind::kModuleType || w.kind == WrapSpec::Kind::kAny;
    const bool path_ok = w.kind == WrapSpec::Kind::kModule || w.kind == WrapSpec::Kind::kAny;
    if (type_ok && name_matches(w.name, m.type)) return true;
    if (path_ok && w.name == m.path) return true;
  }
  return false;
}

bool TraceImpl::wrapped_function(const std::string& name) const {
  for (const auto& w : wraps_) {
    if (w.kind != WrapSpec::Kind::kFunction && w.kind != WrapSpec::Kind::kAny) continue;
    if (name_matches(w.name, name)) return true;
  }
  return false;
}

std::string TraceImpl::where(const JNode* n) const {
  auto range = n->sourceRange();
  if (auto orig = range.findSourceRangeThatGenerated()) range = *orig;
  std::ostringstream os;
  if (!range.source()) return "<unknown source>";
  if (auto flc = range.file_line_col()) {
    os << std::get<0>(*flc) << ":" << std::get<1>(*flc);
  } else {
    os << "<unknown source>";
  }
  std::string text(range.text().str());
  auto nl = text.find('\n');
  if (nl != std::string::npos) text = text.substr(0, nl);
  if (!text.empty()) os << ": `" << text << "`";
  return os.str();
}

std::string TraceImpl::suggestion() const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    if (!it->function.empty()) return "wrap it: tracer.wrap: [\"function:" + it->function + "\"]";
    if (!it->method.empty() && it->method != "forward") {
      return "wrap it: tracer.wrap: [\"method:" + join(it->module_path, it->method) + "\"]";
    }
    if (!it->module_path.empty()) {
      return "wrap it: tracer.wrap: [\"module_type:" + detail::short_type(it->module_type) + "\"] (or \"module:" +
             it->module_path + "\")";
    }
  }
  return "move it into a method of the model or a submodule and wrap that (tracer.wrap: [\"method:NAME\"] or "
         "[\"module_type:NAME\"])";
}

[[noreturn]] void TraceImpl::fail(const JNode* n, const std::string& what) const {
  const Frame& f = frames_.back();
  std::string ctx = f.module_path.empty() ? "the root module" : "module '" + f.module_path + "'";
  ctx += " (" + detail::short_type(f.module_type) + ")";
  if (!f.function.empty()) ctx += ", function " + f.function;
  else if (!f.method.empty()) ctx += ", method " + f.method;
  throw TraceError(where(n) + ": " + what + " in " + ctx + "; " + suggestion());
}

IValue TraceImpl::materialize(const Sym& s) const {
  switch (s.k) {
    case Sym::K::kConst: return s.c;
    case Sym::K::kList: {
      c10::impl::GenericList l(s.elem ? s.elem : c10::AnyType::get());
      for (const auto& i : *s.items) l.push_back(materialize(i));
      return IValue(l);
    }
    case Sym::K::kTuple: {
      std::vector<IValue> v;
      for (const auto& i : *s.items) v.push_back(materialize(i));
      return c10::ivalue::Tuple::create(std::move(v));
    }
    default: throw InternalError("materialize of a non-constant");
  }
}

Argument TraceImpl::to_arg(const Sym& s, const JNode* n) {
  switch (s.k) {
    case Sym::K::kConst: return Argument(s.c);
    case Sym::K::kProxy: return Argument(s.node);
    case Sym::K::kList:
    case Sym::K::kTuple: {
      if (s.is_const()) return Argument(materialize(s));
      std::vector<Argument> items;
      for (const auto& i : *s.items) items.push_back(to_arg(i, n));
      return s.k == Sym::K::kList ? Argument::list(std::move(items), s.elem) : Argument::tuple(std::move(items));
    }
    case Sym::K::kModule:
      if (n) fail(n, "a module is used as a value");
      throw TraceError("a module is used as a value (returned from forward?)");
    case Sym::K::kFunction:
      if (n) fail(n, "a function is used as a value");
      throw TraceError("a function is used as a value");
    case Sym::K::kDict: {  // the values, in insertion order (the output node names the keys)
      std::vector<Argument> items;
      for (const auto& i : *s.items) items.push_back(to_arg(i, n));
      return Argument::tuple(std::move(items));
    }
    case Sym::K::kParam: {
      Node* p = param_node(s.param);
      if (!s.transposed) return Argument(p);
      Node* t = g_.call_function("aten::t", {Argument(p)});
      return Argument(t);
    }
  }
  return {};
}

Node* TraceImpl::param_node(int idx) {
  const CxxTensor& t = cxx_tensors_.at(static_cast<size_t>(idx));
  auto it = attr_nodes_.find(t.path);
  if (it != attr_nodes_.end()) return it->second;
  if (!gm_->has_attr(t.path)) gm_->add_tensor(t.path, t.tensor, t.buffer);
  Node* ga = g_.get_attr(t.path, t.path);
  ga->meta()["module_path"] = std::string();
  attr_nodes_.emplace(t.path, ga);
  return ga;
}

const TraceImpl::CxxLeaf* TraceImpl::leaf_of_weight(int idx, std::string* path_out) {
  const std::string& wpath = cxx_tensors_.at(static_cast<size_t>(idx)).path;
  const auto dot = wpath.rfind('.');
  if (dot == std::string::npos || wpath.substr(dot + 1) != "weight") return nullptr;
  *path_out = wpath.substr(0, dot);
  auto it = cxx_leaves_.find(*path_out);
  return it == cxx_leaves_.end() ? nullptr : &it->second;
}

bool TraceImpl::is_bias_of(const Sym& s, const std::string& path) const {
  return s.k == Sym::K::kParam && !s.transposed && cxx_tensors_.at(static_cast<size_t>(s.param)).path == path + ".bias";
}

Node* TraceImpl::emit_cxx_leaf(JNode* n, const std::string& path, const CxxLeaf& leaf, const Sym& input) {
  if (!gm_->get_submodule(path)) gm_->add_submodule(path, leaf.module, leaf.fn);
  Node* fxn = g_.call_module(path, {to_arg(input, n)}, {}, path);
  annotate(fxn, n);
  fxn->meta()["module_type"] = leaf.type;
  return fxn;
}

bool TraceImpl::cxx_linear_pattern(JNode* n, Env& env, const std::string& op) {
  if (cxx_leaves_.empty()) return false;
  if (op == "aten::t" && n->inputs().size() == 1) {
    const Sym& w = in(n, 0, env);
    std::string path;
    const CxxLeaf* leaf = w.k == Sym::K::kParam && !w.transposed ? leaf_of_weight(w.param, &path) : nullptr;
    if (leaf && leaf->type == "torch.nn.modules.linear.Linear") {
      Sym t = w;
      t.transposed = true;
      env[n->output()] = t;
      return true;
    }
    return false;
  }
  auto weight_t = [&](size_t i, std::string* path) -> const CxxLeaf* {
    const Sym& s = in(n, i, env);
    if (s.k != Sym::K::kParam || !s.transposed) return nullptr;
    return leaf_of_weight(s.param, path);
  };
  std::string path;
  if (op == "aten::addmm" && n->inputs().size() == 5) {
    const CxxLeaf* leaf = weight_t(2, &path);
    const Sym& beta = in(n, 3, env);
    const Sym& alpha = in(n, 4, env);
    if (!leaf || !is_bias_of(in(n, 0, env), path) || beta.k != Sym::K::kConst || alpha.k != Sym::K::kConst ||
        beta.c.toScalar().toDouble() != 1.0 || alpha.c.toScalar().toDouble() != 1.0) {
      return false;
    }
    env[n->output()] = Sym::proxy(emit_cxx_leaf(n, path, *leaf, in(n, 1, env)));
    return true;
  }
  if ((op == "aten::matmul" || op == "aten::mm") && n->inputs().size() == 2) {
    const CxxLeaf* leaf = weight_t(1, &path);
    if (!leaf) return false;
    Sym out = Sym::proxy(emit_cxx_leaf(n, path, *leaf, in(n, 0, env)));
    // The leaf adds its bias itself: the add that follows must not add it again.
    auto* lin = dynamic_cast<torch::nn::LinearImpl*>(leaf->module.get());
    if (lin && lin->options.bias()) {
      for (size_t i = 0; i < cxx_tensors_.size(); ++i) {
        if (cxx_tensors_[i].path == path + ".bias") out.pending_bias = static_cast<int>(i);
      }
    }
    env[n->output()] = out;
    return true;
  }
  if ((op == "aten::add" || op == "aten::add_") && n->inputs().size() == 3) {
    const Sym& a = in(n, 0, env);
    const Sym& b = in(n, 1, env);
    if (a.k == Sym::K::kProxy && a.pending_bias >= 0 && b.k == Sym::K::kParam && b.param == a.pending_bias) {
      Sym out = a;
      out.pending_bias = -1;
      env[n->output()] = out;
      return true;
    }
  }
  return false;
}

bool TraceImpl::cxx_leaf_call(JNode* n, Env& env, const std::string& op) {
  static const std::unordered_set<std::string> kOps = {"aten::conv1d", "aten::conv2d", "aten::conv3d",
                                                       "aten::_convolution", "aten::conv_transpose2d", "aten::linear",
                                                       "aten::batch_norm"};
  if (cxx_linear_pattern(n, env, op)) return true;
  if (cxx_leaves_.empty() || !kOps.count(op) || n->inputs().size() < 2) return false;
  const Sym& w = in(n, 1, env);
  if (w.k != Sym::K::kParam || w.transposed) return false;
  std::string path;
  const CxxLeaf* leaf = leaf_of_weight(w.param, &path);
  if (!leaf) return false;
  bind_outputs(n, emit_cxx_leaf(n, path, *leaf, in(n, 0, env)), env);
  return true;
}

Argument TraceImpl::tuple_arg(const std::vector<Sym>& outs) {
  std::vector<Argument> items;
  for (const auto& o : outs) items.push_back(to_arg(o, nullptr));
  return Argument::tuple(std::move(items));
}

void TraceImpl::annotate(Node* fxn, const JNode* n) {
  if (n) fxn->meta()["source"] = where(n);
  fxn->meta()["module_path"] = frames_.back().module_path;
  if (n && n->outputs().size() == 1) {
    fxn->meta()["type"] = n->output()->type()->str();
    fxn->meta()["is_tensor"] = n->output()->type()->kind() == c10::TypeKind::TensorType;
  }
}

void TraceImpl::bind_outputs(const JNode* n, Node* fxn, Env& env) {
  if (n->outputs().size() == 1) {
    env[n->output()] = Sym::proxy(fxn);
    return;
  }
  for (size_t i = 0; i < n->outputs().size(); ++i) {
    Node* gi = g_.call_function("getitem", {Argument(fxn), Argument(IValue(static_cast<int64_t>(i)))}, {},
                                fxn->name() + "_" + std::to_string(i));
    annotate(gi, n);
    gi->meta()["is_tensor"] = n->outputs()[i]->type()->kind() == c10::TypeKind::TensorType;
    env[n->outputs()[i]] = Sym::proxy(gi);
  }
}

}  // namespace qfx::fx::detail
