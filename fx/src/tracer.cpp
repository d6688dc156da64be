#include "qfx/fx/tracer.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/library.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cctype>
#include <mutex>

#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "leaf_modules.h"
#include "qfx/error.h"

namespace qfx::fx {

using c10::IValue;
using JNode = torch::jit::Node;
using JValue = torch::jit::Value;

// ---- WrapSpec -------------------------------------------------------------------

WrapSpec WrapSpec::parse(const std::string& text) {
  auto trim = [](std::string s) {
    size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
  };
  WrapSpec w;
  std::string t = trim(text);
  const auto colon = t.find(':');
  if (colon != std::string::npos && t.compare(colon, 2, "::") != 0) {
    std::string kind = trim(t.substr(0, colon));
    w.name = trim(t.substr(colon + 1));
    if (kind == "method") w.kind = Kind::kMethod;
    else if (kind == "function") w.kind = Kind::kFunction;
    else if (kind == "module_type") w.kind = Kind::kModuleType;
    else if (kind == "module") w.kind = Kind::kModule;
    else
      throw ConfigError("wrap entry '" + text + "': unknown kind '" + kind +
                        "' (expected method, function, module_type or module)");
  } else {
    w.name = t;
    w.kind = t.find("::") != std::string::npos ? Kind::kFunction : Kind::kAny;
  }
  if (w.name.empty()) throw ConfigError("wrap entry '" + text + "': empty name");
  return w;
}

std::string WrapSpec::str() const {
  switch (kind) {
    case Kind::kAny: return name;
    case Kind::kMethod: return "method:" + name;
    case Kind::kFunction: return "function:" + name;
    case Kind::kModuleType: return "module_type:" + name;
    case Kind::kModule: return "module:" + name;
  }
  return name;
}

// ---- loading --------------------------------------------------------------------

torch::jit::Module load_torchscript(const std::string& path) {
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw IoError(path + ": cannot open TorchScript file (missing or unreadable)");
    char magic[4] = {0, 0, 0, 0};
    f.read(magic, 4);
    if (f.gcount() < 4 || magic[0] != 'P' || magic[1] != 'K') {
      throw IoError(path + ": not a TorchScript archive (expected a zip file saved by torch.jit.save)");
    }
  }
  try {
    return torch::jit::load(path);
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    auto nl = msg.find('\n');
    if (nl != std::string::npos) msg = msg.substr(0, nl);
    throw IoError(path + ": cannot load TorchScript archive (truncated or corrupt?): " + msg);
  } catch (const std::exception& e) {
    throw IoError(path + ": cannot load TorchScript archive: " + e.what());
  }
}

namespace {

// ---- symbolic values ----------------------------------------------------------------

struct Sym;
using SymItems = std::shared_ptr<std::vector<Sym>>;

struct Sym {
  enum class K { kConst, kProxy, kModule, kList, kTuple, kFunction, kParam };
  K k = K::kConst;
  IValue c;
  Node* node = nullptr;
  int module = -1;
  SymItems items;
  c10::TypePtr elem;
  torch::jit::Function* fn = nullptr;
  int param = -1;  // kParam: index into the traced C++ module's tensors
  bool transposed = false;  // kParam: aten::t of the tensor, not yet emitted
  int pending_bias = -1;    // kProxy from a C++ Linear leaf: bias param already applied

  static Sym constant(IValue v) { Sym s; s.c = std::move(v); return s; }
  static Sym proxy(Node* n) { Sym s; s.k = K::kProxy; s.node = n; return s; }
  bool has_proxy() const {
    if (k == K::kProxy || k == K::kParam) return true;
    if (items) for (const auto& i : *items) if (i.has_proxy()) return true;
    return false;
  }
  bool is_const() const {
    if (k == K::kConst) return true;
    if (k == K::kList || k == K::kTuple) {
      for (const auto& i : *items) if (!i.is_const()) return false;
      return true;
    }
    return false;
  }
};

struct ModuleCtx {
  torch::jit::Module module;
  std::string path;
  std::string type;  // demangled qualified class name
};

struct Frame {
  std::string module_path;
  std::string module_type;
  std::string method;    // method being traced ("" inside a function)
  std::string function;  // function being traced ("" inside a method)
};

std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

std::string strip_suffix(std::string s) {
  auto dot = s.rfind('.');
  if (dot != std::string::npos && dot + 1 < s.size() &&
      s.find_first_not_of("0123456789", dot + 1) == std::string::npos) {
    s = s.substr(0, dot);
  }
  return s;
}

// A TorchScript module handle exposed as a torch::nn::Module, so that a wrapped
// module sits in the GraphModule's tree: its parameters are listed by
// parameters() and train()/eval() reach its TorchScript code.
class ScriptModuleWrapper : public torch::nn::Module {
 public:
  explicit ScriptModuleWrapper(torch::jit::Module m) : torch::nn::Module("ScriptModuleWrapper"), m_(std::move(m)) {
    for (const auto& p : m_.named_parameters(/*recurse=*/true)) add(p.name, p.value, false);
    for (const auto& b : m_.named_buffers(/*recurse=*/true)) add(b.name, b.value, true);
    torch::nn::Module::train(m_.is_training());
  }
  void train(bool on = true) override {
    torch::nn::Module::train(on);
    m_.train(on);
  }
  torch::jit::Module& script() { return m_; }

 private:
  void add(const std::string& dotted, const at::Tensor& t, bool buffer) {
    torch::nn::Module* cur = this;
    size_t start = 0;
    while (true) {
      size_t dot = dotted.find('.', start);
      std::string part = dotted.substr(start, dot - start);
      if (dot == std::string::npos) {
        if (buffer) cur->register_buffer(part, t);
        else cur->register_parameter(part, t, t.requires_grad());
        return;
      }
      std::shared_ptr<torch::nn::Module> child;
      for (const auto& c : cur->named_children()) if (c.key() == part) child = c.value();
      if (!child) child = cur->register_module(part, std::make_shared<torch::nn::Module>("Module"));
      cur = child.get();
      start = dot + 1;
    }
  }
  torch::jit::Module m_;
};

// ---- the tracer proper -----------------------------------------------------------------

class TraceImpl {
 public:
  TraceImpl(torch::jit::Module root, std::vector<WrapSpec> wraps, int64_t max_unroll)
      : root_(std::move(root)), wraps_(std::move(wraps)), max_unroll_(max_unroll),
        gm_(std::make_shared<GraphModule>()), g_(gm_->graph()) {}

  struct CxxTensor {
    std::string path;
    at::Tensor tensor;
    bool buffer;
  };
  struct CxxLeaf {
    std::shared_ptr<torch::nn::Module> module;
    CallFn fn;
    std::string type;
  };

  // Converts a graph recorded by libtorch's JIT tracer from a C++ module: the first
  // `n_inputs` graph inputs are the example inputs, the rest are `tensors`.
  std::shared_ptr<GraphModule> run_cxx(torch::jit::Graph& graph, size_t n_inputs, std::vector<CxxTensor> tensors,
                                       std::unordered_map<std::string, CxxLeaf> leaves) {
    cxx_tensors_ = std::move(tensors);
    cxx_leaves_ = std::move(leaves);
    std::vector<Sym> inputs;
    for (size_t i = 0; i < graph.inputs().size(); ++i) {
      if (i < n_inputs) {
        Node* p = g_.placeholder(n_inputs == 1 ? "input" : "input_" + std::to_string(i), graph.inputs()[i]->type()->str());
        p->meta()["is_tensor"] = graph.inputs()[i]->type()->kind() == c10::TypeKind::TensorType;
        inputs.push_back(Sym::proxy(p));
      } else {
        Sym s;
        s.k = Sym::K::kParam;
        s.param = static_cast<int>(i - n_inputs);
        inputs.push_back(s);
      }
    }
    frames_.push_back({"", "torch.nn.Module (C++)", "forward", ""});
    auto outs = run_graph(graph, inputs);
    frames_.pop_back();
    g_.output(outs.size() == 1 ? to_arg(outs[0], nullptr) : tuple_arg(outs));
    g_.eliminate_dead_code();
    g_.lint();
    return gm_;
  }

  std::shared_ptr<GraphModule> run() {
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
      p->meta()["is_tensor"] = graph->inputs()[i]->type()->kind() == c10::TypeKind::TensorType;
      inputs.push_back(Sym::proxy(p));
    }
    frames_.push_back({"", modules_[root_idx].type, "forward", ""});
    auto outs = run_graph(*graph, inputs);
    frames_.pop_back();
    g_.output(outs.size() == 1 ? to_arg(outs[0], nullptr) : tuple_arg(outs));

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
    g_.eliminate_dead_code();  // shape checks of assertions and other unused values
    g_.lint();
    return gm_;
  }

 private:
  using Env = std::unordered_map<const JValue*, Sym>;

  // ---- modules ----
  int module_index(const torch::jit::Module& m, const std::string& path) {
    auto it = module_by_path_.find(path);
    if (it != module_by_path_.end()) return it->second;
    modules_.push_back({m, path, detail::demangle_type(m.type()->name()->qualifiedName())});
    module_by_path_[path] = static_cast<int>(modules_.size()) - 1;
    return static_cast<int>(modules_.size()) - 1;
  }
  static Sym module_sym(int idx) { Sym s; s.k = Sym::K::kModule; s.module = idx; return s; }

  // ---- wraps ----
  bool name_matches(const std::string& spec, const std::string& qualified) const {
    if (spec == qualified) return true;
    auto dot = qualified.rfind('.');
    return dot != std::string::npos && spec == qualified.substr(dot + 1);
  }
  bool wrapped_method(const std::string& path, const std::string& method) const {
    for (const auto& w : wraps_) {
      if (w.kind != WrapSpec::Kind::kMethod && w.kind != WrapSpec::Kind::kAny) continue;
      if (w.name == method || w.name == join(path, method)) return true;
    }
    return false;
  }
  bool wrapped_module(const ModuleCtx& m) const {
    if (m.path.empty()) return false;
    for (const auto& w : wraps_) {
      const bool type_ok = w.kind == WrapSpec::Kind::kModuleType || w.kind == WrapSpec::Kind::kAny;
      const bool path_ok = w.kind == WrapSpec::Kind::kModule || w.kind == WrapSpec::Kind::kAny;
      if (type_ok && name_matches(w.name, m.type)) return true;
      if (path_ok && w.name == m.path) return true;
    }
    return false;
  }
  bool wrapped_function(const std::string& name) const {
    for (const auto& w : wraps_) {
      if (w.kind != WrapSpec::Kind::kFunction && w.kind != WrapSpec::Kind::kAny) continue;
      if (name_matches(w.name, name)) return true;
    }
    return false;
  }

  // ---- errors ----
  std::string where(const JNode* n) const {
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

  std::string suggestion() const {
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

  [[noreturn]] void fail(const JNode* n, const std::string& what) const {
    const Frame& f = frames_.back();
    std::string ctx = f.module_path.empty() ? "the root module" : "module '" + f.module_path + "'";
    ctx += " (" + detail::short_type(f.module_type) + ")";
    if (!f.function.empty()) ctx += ", function " + f.function;
    else if (!f.method.empty()) ctx += ", method " + f.method;
    throw TraceError(where(n) + ": " + what + " in " + ctx + "; " + suggestion());
  }

  // ---- conversion ----
  IValue materialize(const Sym& s) const {
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
      default: throw std::logic_error("materialize of a non-constant");
    }
  }

  Argument to_arg(const Sym& s, const JNode* n) {
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
      case Sym::K::kParam: {
        Node* p = param_node(s.param);
        if (!s.transposed) return Argument(p);
        Node* t = g_.call_function("aten::t", {Argument(p)});
        return Argument(t);
      }
    }
    return {};
  }

  Node* param_node(int idx) {
    const CxxTensor& t = cxx_tensors_.at(static_cast<size_t>(idx));
    auto it = attr_nodes_.find(t.path);
    if (it != attr_nodes_.end()) return it->second;
    if (!gm_->has_attr(t.path)) gm_->add_tensor(t.path, t.tensor, t.buffer);
    Node* ga = g_.get_attr(t.path, t.path);
    ga->meta()["module_path"] = std::string();
    attr_nodes_.emplace(t.path, ga);
    return ga;
  }

  // The C++ leaf at `*path_out` if tensor `idx` is its weight, else nullptr.
  const CxxLeaf* leaf_of_weight(int idx, std::string* path_out) {
    const std::string& wpath = cxx_tensors_.at(static_cast<size_t>(idx)).path;
    const auto dot = wpath.rfind('.');
    if (dot == std::string::npos || wpath.substr(dot + 1) != "weight") return nullptr;
    *path_out = wpath.substr(0, dot);
    auto it = cxx_leaves_.find(*path_out);
    return it == cxx_leaves_.end() ? nullptr : &it->second;
  }
  bool is_bias_of(const Sym& s, const std::string& path) const {
    return s.k == Sym::K::kParam && !s.transposed && cxx_tensors_.at(static_cast<size_t>(s.param)).path == path + ".bias";
  }
  Node* emit_cxx_leaf(JNode* n, const std::string& path, const CxxLeaf& leaf, const Sym& input) {
    if (!gm_->get_submodule(path)) gm_->add_submodule(path, leaf.module, leaf.fn);
    Node* fxn = g_.call_module(path, {to_arg(input, n)}, {}, path);
    annotate(fxn, n);
    fxn->meta()["module_type"] = leaf.type;
    return fxn;
  }

  // libtorch records a C++ Linear as t(W) then addmm(b, x, W^T), or matmul(x, W^T)
  // then add(b) for inputs of rank > 2: fold those back into one call_module.
  bool cxx_linear_pattern(JNode* n, Env& env, const std::string& op) {
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

  // conv / linear / batch_norm on the weight of a C++ Conv/Linear/BatchNorm
  // submodule: one call_module node on that submodule.
  bool cxx_leaf_call(JNode* n, Env& env, const std::string& op) {
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
  Argument tuple_arg(const std::vector<Sym>& outs) {
    std::vector<Argument> items;
    for (const auto& o : outs) items.push_back(to_arg(o, nullptr));
    return Argument::tuple(std::move(items));
  }

  void annotate(Node* fxn, const JNode* n) {
    if (n) fxn->meta()["source"] = where(n);
    fxn->meta()["module_path"] = frames_.back().module_path;
    if (n && n->outputs().size() == 1) {
      fxn->meta()["type"] = n->output()->type()->str();
      fxn->meta()["is_tensor"] = n->output()->type()->kind() == c10::TypeKind::TensorType;
    }
  }

  // Splits a multi-output node into getitem nodes.
  void bind_outputs(const JNode* n, Node* fxn, Env& env) {
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

  // ---- graph walking ----
  std::vector<Sym> run_graph(torch::jit::Graph& graph, const std::vector<Sym>& inputs) {
    Env env;
    for (size_t i = 0; i < graph.inputs().size(); ++i) {
      env[graph.inputs()[i]] = i < inputs.size() ? inputs[i] : Sym::constant(IValue());
    }
    run_block(graph.block(), env);
    std::vector<Sym> outs;
    for (const JValue* v : graph.outputs()) outs.push_back(env.at(v));
    return outs;
  }

  void run_block(torch::jit::Block* b, Env& env) {
    for (JNode* n : b->nodes()) run_node(n, env);
  }

  const Sym& in(const JNode* n, size_t i, Env& env) {
    auto it = env.find(n->inputs()[i]);
    if (it == env.end()) fail(n, "internal: value %" + n->inputs()[i]->debugName() + " is undefined");
    return it->second;
  }

  void run_node(JNode* n, Env& env) {
    const auto kind = n->kind();
    if (kind == c10::prim::Constant) {
      auto t = n->output()->type();
      if (t->kind() == c10::TypeKind::FunctionType) {
        Sym s;
        s.k = Sym::K::kFunction;
        s.fn = t->expect<c10::FunctionType>()->function();
        env[n->output()] = s;
      } else {
        auto v = torch::jit::toIValue(n->output());
        if (!v) fail(n, "unsupported constant of type " + t->str());
        env[n->output()] = Sym::constant(*v);
      }
      return;
    }
    if (kind == c10::prim::GetAttr) return get_attr(n, env);
    if (kind == c10::prim::CallMethod) return call_method(n, env);
    if (kind == c10::prim::CallFunction) return call_function(n, env);
    if (kind == c10::prim::If) return run_if(n, env);
    if (kind == c10::prim::Loop) return run_loop(n, env);
    if (kind == c10::prim::ListConstruct || kind == c10::prim::TupleConstruct) {
      Sym s;
      s.k = kind == c10::prim::ListConstruct ? Sym::K::kList : Sym::K::kTuple;
      s.items = std::make_shared<std::vector<Sym>>();
      for (size_t i = 0; i < n->inputs().size(); ++i) s.items->push_back(in(n, i, env));
      if (s.k == Sym::K::kList) s.elem = n->output()->type()->expect<c10::ListType>()->getElementType();
      env[n->output()] = s;
      return;
    }
    if (kind == c10::prim::ListUnpack || kind == c10::prim::TupleUnpack) {
      const Sym& s = in(n, 0, env);
      for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = element(n, s, static_cast<int64_t>(i));
      return;
    }
    if (kind == c10::prim::TupleIndex) {
      const Sym& idx = in(n, 1, env);
      if (idx.k != Sym::K::kConst) fail(n, "tuple index depends on tensor values");
      env[n->output()] = element(n, in(n, 0, env), idx.c.toInt());
      return;
    }
    if (kind == c10::prim::unchecked_cast) {
      env[n->output()] = in(n, 0, env);
      return;
    }
    if (kind == c10::prim::Uninitialized) {
      env[n->output()] = Sym::constant(IValue());
      return;
    }
    if (kind == c10::prim::RaiseException) fail(n, "the model raises an exception on this path");
    if (kind == c10::prim::SetAttr) fail(n, "the model assigns a module attribute (prim::SetAttr)");
    if (kind == c10::prim::isinstance) return run_isinstance(n, env);
    if (kind == c10::aten::warn || kind == c10::prim::Print) return;
    if (kind == c10::aten::__is__ || kind == c10::aten::__isnot__) {
      const Sym& a = in(n, 0, env);
      const Sym& b = in(n, 1, env);
      const bool a_none = a.k == Sym::K::kConst && a.c.isNone();
      const bool b_none = b.k == Sym::K::kConst && b.c.isNone();
      if ((a.has_proxy() && b_none) || (b.has_proxy() && a_none)) {
        // A traced value is never None.
        env[n->output()] = Sym::constant(IValue(kind == c10::aten::__isnot__));
        return;
      }
    }
    if (structural_list_op(n, env)) return;
    run_operator(n, env);
  }

  Sym element(const JNode* n, const Sym& s, int64_t i) {
    if (s.k == Sym::K::kList || s.k == Sym::K::kTuple) {
      const auto size = static_cast<int64_t>(s.items->size());
      if (i < 0) i += size;
      if (i < 0 || i >= size) fail(n, "index out of range");
      return (*s.items)[static_cast<size_t>(i)];
    }
    if (s.k == Sym::K::kConst) {
      if (s.c.isTuple()) return Sym::constant(s.c.toTupleRef().elements().at(static_cast<size_t>(i)));
      if (s.c.isList()) return Sym::constant(s.c.toListRef().at(static_cast<size_t>(i)));
    }
    if (s.k == Sym::K::kProxy) {
      Node* gi = g_.call_function("getitem", {Argument(s.node), Argument(IValue(i))}, {},
                                  s.node->name() + "_" + std::to_string(i));
      annotate(gi, n);
      return Sym::proxy(gi);
    }
    fail(n, "cannot index this value");
  }

  // Ops on Python lists whose elements may be traced values: handled on the
  // symbolic list itself (aliasing kept), as torch.fx does with Python lists.
  bool structural_list_op(JNode* n, Env& env) {
    if (n->inputs().empty()) return false;
    const Sym& first = in(n, 0, env);
    if (first.k != Sym::K::kList && first.k != Sym::K::kTuple) return false;
    if (first.is_const() && !n->hasUses()) {
      // fine to fold below unless it mutates
    }
    const std::string op = n->kind().toQualString();
    auto& items = *first.items;
    if (op == "aten::len") {
      env[n->output()] = Sym::constant(IValue(static_cast<int64_t>(items.size())));
      return true;
    }
    if (op == "aten::__getitem__") {
      const Sym& idx = in(n, 1, env);
      if (idx.k != Sym::K::kConst) fail(n, "list index depends on tensor values");
      env[n->output()] = element(n, first, idx.c.toInt());
      return true;
    }
    if (op == "aten::append") {
      items.push_back(in(n, 1, env));
      env[n->output()] = first;
      return true;
    }
    if (op == "aten::extend") {
      const Sym& other = in(n, 1, env);
      if (other.k != Sym::K::kList) return false;
      for (const auto& i : *other.items) items.push_back(i);
      return true;
    }
    if (op == "aten::_set_item") {
      const Sym& idx = in(n, 1, env);
      if (idx.k != Sym::K::kConst) fail(n, "list index depends on tensor values");
      int64_t i = idx.c.toInt();
      if (i < 0) i += static_cast<int64_t>(items.size());
      items.at(static_cast<size_t>(i)) = in(n, 2, env);
      env[n->output()] = first;
      return true;
    }
    if (op == "aten::insert" || op == "aten::pop" || op == "aten::clear" || op == "aten::remove" ||
        op == "aten::reverse") {
      if (first.is_const()) return false;
      fail(n, "in-place list operation " + op + " on a list of traced values");
    }
    return false;
  }

  void run_isinstance(JNode* n, Env& env) {
    const Sym& s = in(n, 0, env);
    c10::TypePtr actual;
    if (s.k == Sym::K::kConst) actual = s.c.type();
    else if (s.k == Sym::K::kProxy || s.k == Sym::K::kList || s.k == Sym::K::kTuple) actual = n->input(0)->type();
    if (actual && actual->kind() == c10::TypeKind::OptionalType && s.k != Sym::K::kConst) {
      actual = actual->expect<c10::OptionalType>()->getElementType();
    }
    bool result = false;
    if (actual) {
      for (const auto& t : n->tys(c10::attr::types)) result = result || actual->isSubtypeOf(*t);
    }
    env[n->output()] = Sym::constant(IValue(result));
  }

  void get_attr(JNode* n, Env& env) {
    const Sym& base = in(n, 0, env);
    const std::string name = n->s(c10::attr::name);
    if (base.k != Sym::K::kModule) fail(n, "attribute '" + name + "' read from a non-module value");
    ModuleCtx ctx = modules_[base.module];
    const std::string path = join(ctx.path, name);
    IValue v = ctx.module.attr(name);
    if (v.isModule()) {
      env[n->output()] = module_sym(module_index(v.toModule(), path));
      return;
    }
    if (v.isTensor()) {
      auto it = attr_nodes_.find(path);
      if (it == attr_nodes_.end()) {
        const auto slot = ctx.module.type()->getAttributeSlot(name);
        const bool param = ctx.module.type()->is_parameter(slot);
        if (!gm_->has_attr(path)) gm_->add_tensor(path, v.toTensor(), !param);
        Node* ga = g_.get_attr(path, path);
        annotate(ga, n);
        it = attr_nodes_.emplace(path, ga).first;
      }
      env[n->output()] = Sym::proxy(it->second);
      return;
    }
    env[n->output()] = Sym::constant(v);
  }

  void call_method(JNode* n, Env& env) {
    const Sym& self = in(n, 0, env);
    const std::string method = n->s(c10::attr::name);
    if (self.k != Sym::K::kModule) fail(n, "method '" + method + "' called on a non-module value");
    const int idx = self.module;
    ModuleCtx ctx = modules_[idx];
    std::vector<Sym> args;
    for (size_t i = 1; i < n->inputs().size(); ++i) args.push_back(in(n, i, env));

    if (method != "forward" && wrapped_method(ctx.path, method)) {
      const std::string target = join(ctx.path, method);
      if (!gm_->method_fn(target)) {
        torch::jit::Module m = ctx.module;
        gm_->add_method(target, [m, method](std::vector<IValue>& a) mutable -> IValue {
          return m.get_method(method)(a);
        });
        method_owners_.push_back(ctx);
      }
      std::vector<Argument> fx_args;
      for (const auto& a : args) fx_args.push_back(to_arg(a, n));
      Node* fxn = g_.call_method(target, std::move(fx_args), {}, method);
      annotate(fxn, n);
      bind_outputs(n, fxn, env);
      return;
    }
    if (method == "forward" && wrapped_module(ctx)) {
      if (!gm_->get_submodule(ctx.path)) {
        auto w = std::make_shared<ScriptModuleWrapper>(ctx.module);
        torch::jit::Module m = ctx.module;
        gm_->add_submodule(ctx.path, w, [m](std::vector<IValue>& a) mutable -> IValue { return m.forward(a); });
      }
      emit_call_module(n, ctx.path, args, env);
      return;
    }
    if (method == "forward" && !args.empty() && args[0].k == Sym::K::kProxy) {
      bool extras_none = true;
      for (size_t i = 1; i < args.size(); ++i) extras_none = extras_none && args[i].k == Sym::K::kConst && args[i].c.isNone();
      if (extras_none && !ctx.path.empty()) {
        if (leaves_.count(ctx.path)) {
          emit_call_module(n, ctx.path, {args[0]}, env);
          return;
        }
        torch::jit::Module m = ctx.module;
        if (auto leaf = detail::make_leaf(m)) {
          gm_->add_submodule(ctx.path, leaf->module, leaf->fn);
          leaves_.insert(ctx.path);
          emit_call_module(n, ctx.path, {args[0]}, env);
          return;
        }
      }
    }
    // Trace through the method.
    auto graph = ctx.module.get_method(method).graph();
    std::vector<Sym> inputs{self};
    inputs.insert(inputs.end(), args.begin(), args.end());
    frames_.push_back({ctx.path, ctx.type, method, ""});
    auto outs = run_graph(*graph, inputs);
    frames_.pop_back();
    for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = outs.at(i);
  }

  void emit_call_module(JNode* n, const std::string& path, const std::vector<Sym>& args, Env& env) {
    std::vector<Argument> fx_args;
    for (const auto& a : args) fx_args.push_back(to_arg(a, n));
    Node* fxn = g_.call_module(path, std::move(fx_args), {}, path);
    annotate(fxn, n);
    auto mit = module_by_path_.find(path);
    if (mit != module_by_path_.end()) fxn->meta()["module_type"] = modules_[mit->second].type;
    bind_outputs(n, fxn, env);
  }

  void call_function(JNode* n, Env& env) {
    const Sym& f = in(n, 0, env);
    if (f.k != Sym::K::kFunction) fail(n, "call of a non-function value");
    torch::jit::Function* fn = f.fn;
    const std::string qname = detail::demangle_type(fn->qualname().qualifiedName());
    std::vector<Sym> args;
    for (size_t i = 1; i < n->inputs().size(); ++i) args.push_back(in(n, i, env));

    if (wrapped_function(qname)) {
      if (!gm_->function_fn(qname)) {
        auto cu = root_._ivalue()->compilation_unit();
        gm_->add_function(qname, [fn, cu](std::vector<IValue>& a) -> IValue { return (*fn)(a); });
      }
      std::vector<Argument> fx_args;
      for (const auto& a : args) fx_args.push_back(to_arg(a, n));
      Node* fxn = g_.call_function(qname, std::move(fx_args));
      annotate(fxn, n);
      bind_outputs(n, fxn, env);
      return;
    }
    auto& gf = torch::jit::toGraphFunction(*fn);
    frames_.push_back({frames_.back().module_path, frames_.back().module_type, "", qname});
    auto outs = run_graph(*gf.graph(), args);
    frames_.pop_back();
    for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = outs.at(i);
  }

  void run_if(JNode* n, Env& env) {
    const Sym& cond = in(n, 0, env);
    torch::jit::Block* b = nullptr;
    if (cond.k == Sym::K::kConst) {
      b = n->blocks()[cond.c.toBool() ? 0 : 1];
    } else {
      // An assertion (`assert cond` / `if cond: ... else: raise`) on traced values
      // is assumed to hold, as torch.fx treats torch._assert: take the branch
      // that does not raise.
      const bool raise0 = raises(n->blocks()[0]), raise1 = raises(n->blocks()[1]);
      if (raise0 == raise1) fail(n, "control flow depends on tensor values (data-dependent `if`)");
      b = n->blocks()[raise0 ? 1 : 0];
    }
    run_block(b, env);
    for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = env.at(b->outputs()[i]);
  }

  static bool raises(torch::jit::Block* b) {
    for (JNode* n : b->nodes()) if (n->kind() == c10::prim::RaiseException) return true;
    return false;
  }

  void run_loop(JNode* n, Env& env) {
    const Sym& trip = in(n, 0, env);
    const Sym& cond0 = in(n, 1, env);
    if (trip.k != Sym::K::kConst || cond0.k != Sym::K::kConst) {
      fail(n, "loop whose trip count or condition depends on tensor values");
    }
    const int64_t max_trip = trip.c.toInt();
    bool cond = cond0.c.toBool();
    std::vector<Sym> carried;
    for (size_t i = 2; i < n->inputs().size(); ++i) carried.push_back(in(n, i, env));
    torch::jit::Block* body = n->blocks()[0];
    int64_t it = 0;
    for (; it < max_trip && cond; ++it) {
      if (it >= max_unroll_) fail(n, "loop runs more than " + std::to_string(max_unroll_) + " iterations");
      env[body->inputs()[0]] = Sym::constant(IValue(it));
      for (size_t i = 0; i < carried.size(); ++i) env[body->inputs()[i + 1]] = carried[i];
      run_block(body, env);
      const Sym& c = env.at(body->outputs()[0]);
      if (c.k != Sym::K::kConst) fail(n, "loop condition depends on tensor values");
      cond = c.c.toBool();
      for (size_t i = 0; i < carried.size(); ++i) carried[i] = env.at(body->outputs()[i + 1]);
    }
    for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = carried.at(i);
  }

  static bool produces_tensor(const c10::TypePtr& t) {
    if (t->kind() == c10::TypeKind::TensorType) return true;
    for (const auto& c : t->containedTypes()) if (produces_tensor(c)) return true;
    return false;
  }

  void run_operator(JNode* n, Env& env) {
    const torch::jit::Operator* op = n->maybeOperator();
    if (!op) fail(n, std::string("unsupported TorchScript construct ") + n->kind().toQualString());
    const auto& schema = op->schema();
    std::string target = schema.name();
    if (!schema.overload_name().empty()) target += "." + schema.overload_name();
    if (cxx_leaf_call(n, env, schema.name())) return;

    bool any_proxy = false;
    for (size_t i = 0; i < n->inputs().size(); ++i) any_proxy = any_proxy || in(n, i, env).has_proxy();
    bool tensor_out = false;
    for (const JValue* o : n->outputs()) tensor_out = tensor_out || produces_tensor(o->type());
    const bool wrapped = wrapped_function(schema.name()) || wrapped_function(target);

    if (!any_proxy && !tensor_out && !wrapped && op->hasOperation()) {
      // Constant folding: run the op now, as Python would at trace time.
      torch::jit::Stack stack;
      for (size_t i = 0; i < n->inputs().size(); ++i) stack.push_back(materialize(in(n, i, env)));
      try {
        op->getOperation(n)(stack);
      } catch (const c10::Error& e) {
        fail(n, std::string("evaluating ") + target + " on constants failed: " + e.what_without_backtrace());
      }
      const size_t nout = n->outputs().size();
      for (size_t i = 0; i < nout; ++i) env[n->outputs()[i]] = Sym::constant(stack[stack.size() - nout + i]);
      return;
    }
    if (!op->hasOperation()) fail(n, "operator " + target + " cannot be recorded in a graph");
    std::vector<Argument> args;
    for (size_t i = 0; i < n->inputs().size(); ++i) args.push_back(to_arg(in(n, i, env), n));
    Node* fxn = g_.call_function(target, std::move(args));
    annotate(fxn, n);
    if (n->outputs().empty()) return;
    bind_outputs(n, fxn, env);
  }

  torch::jit::Module root_;
  std::vector<WrapSpec> wraps_;
  int64_t max_unroll_;
  std::shared_ptr<GraphModule> gm_;
  Graph& g_;
  std::vector<ModuleCtx> modules_;
  std::unordered_map<std::string, int> module_by_path_;
  std::unordered_map<std::string, Node*> attr_nodes_;
  std::unordered_set<std::string> leaves_;
  std::vector<ModuleCtx> method_owners_;
  std::vector<Frame> frames_;
  std::vector<CxxTensor> cxx_tensors_;
  std::unordered_map<std::string, CxxLeaf> cxx_leaves_;
};

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

}  // namespace

std::shared_ptr<GraphModule> trace_module(std::shared_ptr<torch::nn::Module> module, const ForwardFn& forward,
                                          std::vector<c10::IValue> example_inputs, TracerOptions options) {
  // Every parameter and buffer is a graph input, so the tracer refers to it
  // instead of baking it in as a constant.
  std::vector<TraceImpl::CxxTensor> tensors;
  for (const auto& p : module->named_parameters(true)) tensors.push_back({p.key(), p.value(), false});
  for (const auto& b : module->named_buffers(true)) tensors.push_back({b.key(), b.value(), true});
  std::unordered_map<std::string, TraceImpl::CxxLeaf> leaves;
  for (const auto& item : module->named_modules("", /*include_self=*/false)) {
    auto m = item.value();
    TraceImpl::CxxLeaf leaf;
    leaf.module = m;
#define QFX_CXX_LEAF(Impl, Name)                                                                   \
    if (auto c = std::dynamic_pointer_cast<torch::nn::Impl>(m)) {                                  \
      leaf.fn = [c](std::vector<IValue>& a) -> IValue { return c->forward(a.at(0).toTensor()); }; \
      leaf.type = "torch.nn.modules." Name;                                                        \
    }
    QFX_CXX_LEAF(Conv1dImpl, "conv.Conv1d")
    QFX_CXX_LEAF(Conv2dImpl, "conv.Conv2d")
    QFX_CXX_LEAF(Conv3dImpl, "conv.Conv3d")
    QFX_CXX_LEAF(ConvTranspose2dImpl, "conv.ConvTranspose2d")
    QFX_CXX_LEAF(LinearImpl, "linear.Linear")
    QFX_CXX_LEAF(BatchNorm1dImpl, "batchnorm.BatchNorm1d")
    QFX_CXX_LEAF(BatchNorm2dImpl, "batchnorm.BatchNorm2d")
    QFX_CXX_LEAF(BatchNorm3dImpl, "batchnorm.BatchNorm3d")
#undef QFX_CXX_LEAF
    if (leaf.fn) leaves.emplace(item.key(), std::move(leaf));
  }
  const size_t n_inputs = example_inputs.size();
  torch::jit::Stack stack = example_inputs;
  for (const auto& t : tensors) stack.push_back(t.tensor);

  const bool was_training = module->is_training();
  struct RestoreMode {
    torch::nn::Module& m;
    bool on;
    ~RestoreMode() { m.train(on); }
  } restore{*module, was_training};
  module->eval();
  std::shared_ptr<torch::jit::tracer::TracingState> state;
  try {
    auto result = torch::jit::tracer::trace(
        stack,
        [&](torch::jit::Stack in) -> torch::jit::Stack {
          in.resize(n_inputs);
          return {forward(std::move(in))};
        },
        [](const at::Tensor&) { return std::string(); }, /*strict=*/false);
    state = result.first;
  } catch (const c10::Error& e) {
    throw TraceError(std::string("libtorch's tracer failed on the C++ module: ") + e.what_without_backtrace());
  }

  TraceImpl impl(torch::jit::Module(), options.wrap, options.max_unroll);
  auto gm = impl.run_cxx(*state->graph, n_inputs, std::move(tensors), std::move(leaves));
  gm->train(was_training);
  return gm;
}

// ---- fx::wrap ---------------------------------------------------------------------

namespace {

struct WrapKernel : c10::OperatorKernel {
  explicit WrapKernel(std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)> f) : fn(std::move(f)) {}
  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    std::vector<at::Tensor> inputs = torch::jit::pop(*stack).toTensorVector();
    torch::jit::push(*stack, c10::IValue(fn(inputs)));
  }
  std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)> fn;
};

std::mutex& wrap_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::unique_ptr<torch::Library>>& wrap_libraries() {
  static std::vector<std::unique_ptr<torch::Library>> libs;
  return libs;
}

}  // namespace

WrappedFunction wrap(const std::string& name,
                     std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)> fn) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != std::string::npos) {
    throw ConfigError("fx::wrap: '" + name + "' is not an identifier");
  }
  const std::string op = "qfx_wrap::" + name;
  std::lock_guard<std::mutex> lock(wrap_mutex());
  if (c10::Dispatcher::singleton().findSchema({op, ""})) throw ConfigError("fx::wrap: '" + name + "' is already registered");
  auto lib = std::make_unique<torch::Library>(torch::Library::FRAGMENT, "qfx_wrap", c10::nullopt, __FILE__, __LINE__);
  lib->def((name + "(Tensor[] inputs) -> Tensor[]").c_str());
  lib->impl(name.c_str(), torch::dispatch(c10::DispatchKey::CompositeImplicitAutograd,
                                          torch::CppFunction::makeFromBoxedFunctor(std::make_unique<WrapKernel>(std::move(fn)))));
  wrap_libraries().push_back(std::move(lib));
  WrappedFunction w;
  w.op_name_ = op;
  w.handle_ = c10::Dispatcher::singleton().findSchemaOrThrow(op.c_str(), "").typed<WrappedFunction::Signature>();
  return w;
}

std::vector<at::Tensor> WrappedFunction::operator()(const std::vector<at::Tensor>& inputs) const {
  return handle_->call(inputs);
}

at::Tensor WrappedFunction::operator()(const at::Tensor& input) const { return (*this)(std::vector<at::Tensor>{input}).at(0); }

QuantizationTracer::QuantizationTracer(TracerOptions options) : options_(std::move(options)) {}

std::shared_ptr<GraphModule> QuantizationTracer::trace(torch::jit::Module module) {
  std::vector<WrapSpec> all = options_.wrap;
  if (options_.use_model_annotations) collect_model_wraps(module, all);
  effective_.clear();
  for (const auto& w : all) {
    bool dup = false;
    for (const auto& e : effective_) dup = dup || (e.kind == w.kind && e.name == w.name);
    if (!dup) effective_.push_back(w);
  }
  if (!module.find_method("forward")) throw TraceError("the TorchScript module has no forward method");
  TraceImpl impl(module, effective_, options_.max_unroll);
  return impl.run();
}

std::shared_ptr<GraphModule> trace_file(const std::string& path, const TracerOptions& options) {
  QuantizationTracer tracer(options);
  auto module = load_torchscript(path);
  try {
    return tracer.trace(module);
  } catch (const TraceError& e) {
    throw TraceError(path + ": " + e.what());
  }
}

}  // namespace qfx::fx
