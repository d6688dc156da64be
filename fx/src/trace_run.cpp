// The tracer: executing TorchScript graphs symbolically (nodes, control flow,
// attribute reads, method and function calls, operators; lists, tuples and dicts
// in trace_containers.cpp).
#include "trace_impl.h"

namespace qfx::fx::detail {

std::vector<Sym> TraceImpl::run_graph(torch::jit::Graph& graph, const std::vector<Sym>& inputs) {
  Env env;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    env[graph.inputs()[i]] = i < inputs.size() ? inputs[i] : Sym::constant(IValue());
  }
  run_block(graph.block(), env);
  std::vector<Sym> outs;
  for (const JValue* v : graph.outputs()) outs.push_back(env.at(v));
  return outs;
}

void TraceImpl::run_block(torch::jit::Block* b, Env& env) {
  for (JNode* n : b->nodes()) run_node(n, env);
}

const Sym& TraceImpl::in(const JNode* n, size_t i, Env& env) {
  auto it = env.find(n->inputs()[i]);
  if (it == env.end()) fail(n, "internal: value %" + n->inputs()[i]->debugName() + " is undefined");
  return it->second;
}

void TraceImpl::run_node(JNode* n, Env& env) {
  const auto kind = n->kind();
  if (kind == c10::prim::Constant) return run_constant(n, env);
  if (kind == c10::prim::GetAttr) return get_attr(n, env);
  if (kind == c10::prim::CallMethod) return call_method(n, env);
  if (kind == c10::prim::CallFunction) return call_function(n, env);
  if (kind == c10::prim::If) return run_if(n, env);
  if (kind == c10::prim::Loop) return run_loop(n, env);
  if (run_construct(n, env) || run_unpack(n, env) || run_passthrough(n, env)) return;
  if (kind == c10::prim::RaiseException) fail(n, "the model raises an exception on this path");
  if (kind == c10::prim::SetAttr) fail(n, "the model assigns a module attribute (prim::SetAttr)");
  if (kind == c10::prim::isinstance) return run_isinstance(n, env);
  if (kind == c10::aten::warn || kind == c10::prim::Print) return;
  if (run_identity(n, env)) return;
  if (structural_dict_op(n, env) || structural_list_op(n, env)) return;
  run_operator(n, env);
}

void TraceImpl::run_constant(JNode* n, Env& env) {
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
}

bool TraceImpl::run_construct(JNode* n, Env& env) {
  const auto kind = n->kind();
  if (kind == c10::prim::ListConstruct || kind == c10::prim::TupleConstruct) {
    Sym s;
    s.k = kind == c10::prim::ListConstruct ? Sym::K::kList : Sym::K::kTuple;
    s.items = std::make_shared<std::vector<Sym>>();
    for (size_t i = 0; i < n->inputs().size(); ++i) s.items->push_back(in(n, i, env));
    if (s.k == Sym::K::kList) s.elem = n->output()->type()->expect<c10::ListType>()->getElementType();
    env[n->output()] = s;
    return true;
  }
  if (n->kind().toQualString() == std::string("aten::dict") && n->inputs().empty()) {  // `OrderedDict()`: filled by _set_item
    auto dt = n->output()->type()->expect<c10::DictType>();
    env[n->output()] = Sym::constant(IValue(c10::impl::GenericDict(dt->getKeyType(), dt->getValueType())));
    return true;
  }
  if (kind == c10::prim::DictConstruct) {
    construct_dict(n, env);
    return true;
  }
  if (n->kind().toQualString() == std::string("aten::dict") && n->inputs().size() == 1 &&
      in(n, 0, env).k == Sym::K::kList && !in(n, 0, env).is_const()) {  // dict([(k, v), ...]) with traced values
    env[n->output()] = dict_from_pairs(n, in(n, 0, env));
    return true;
  }
  return false;
}

Sym TraceImpl::dict_from_pairs(const JNode* n, const Sym& pairs) {
  Sym d = Sym::dict();
  for (const Sym& pair : *pairs.items) {
    const Sym k = element(n, pair, 0), v = element(n, pair, 1);
    if (k.k != Sym::K::kConst) fail(n, "dictionary key depends on tensor values");
    auto at = std::find(d.keys->begin(), d.keys->end(), k.c);
    if (at != d.keys->end()) (*d.items)[static_cast<size_t>(at - d.keys->begin())] = v;
    else d.keys->push_back(k.c), d.items->push_back(v);
  }
  return d;
}

bool TraceImpl::run_unpack(JNode* n, Env& env) {
  const auto kind = n->kind();
  if (kind == c10::prim::ListUnpack || kind == c10::prim::TupleUnpack) {
    const Sym& s = in(n, 0, env);
    for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = element(n, s, static_cast<int64_t>(i));
    return true;
  }
  if (kind == c10::prim::TupleIndex) {
    const Sym& idx = in(n, 1, env);
    if (idx.k != Sym::K::kConst) fail(n, "tuple index depends on tensor values");
    env[n->output()] = element(n, in(n, 0, env), idx.c.toInt());
    return true;
  }
  if (kind == c10::prim::unchecked_cast) {
    env[n->output()] = in(n, 0, env);
    return true;
  }
  return false;
}

bool TraceImpl::run_passthrough(JNode* n, Env& env) {
  const auto kind = n->kind();
  // torch.jit.trace wraps shape arithmetic on a dynamic size (x.shape[0] of the
  // batch) as size -> NumToTensor -> Int: the graph keeps the symbolic int.
  const bool int_to_tensor = kind == c10::prim::NumToTensor && n->inputs()[0]->type()->kind() == c10::TypeKind::IntType;
  const bool back_to_int = (kind == c10::aten::Int || kind == c10::aten::ScalarImplicit) &&
                           n->inputs()[0]->node()->kind() == c10::prim::NumToTensor;
  if ((int_to_tensor || back_to_int) && (in(n, 0, env).k == Sym::K::kProxy || in(n, 0, env).k == Sym::K::kConst)) {
    env[n->output()] = in(n, 0, env);
    return true;
  }
  if (kind == c10::prim::Uninitialized) {
    env[n->output()] = Sym::constant(IValue());
    return true;
  }
  return false;
}

bool TraceImpl::run_identity(JNode* n, Env& env) {
  const auto kind = n->kind();
  if (kind != c10::aten::__is__ && kind != c10::aten::__isnot__) return false;
  const Sym& a = in(n, 0, env);
  const Sym& b = in(n, 1, env);
  const bool a_none = a.k == Sym::K::kConst && a.c.isNone();
  const bool b_none = b.k == Sym::K::kConst && b.c.isNone();
  if ((a.has_proxy() && b_none) || (b.has_proxy() && a_none)) {
    // A traced value is never None.
    env[n->output()] = Sym::constant(IValue(kind == c10::aten::__isnot__));
    return true;
  }
  if (a.k == Sym::K::kProxy && b.k == Sym::K::kProxy) {
    // Identity of traced values is identity of their nodes (MultiheadAttention's
    // `query is key`: self-attention passes one value three times).
    env[n->output()] = Sym::constant(IValue((a.node == b.node) == (kind == c10::aten::__is__)));
    return true;
  }
  return false;
}

void TraceImpl::get_attr(JNode* n, Env& env) {
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
    Sym s = Sym::proxy(it->second);
    if (!input_shapes_.empty()) {
      // The examples read the tensor itself; a copy in training mode, where ops
      // update buffers in place (batch norm's running statistics).
      IValue t = root_.is_training() ? IValue(v.toTensor().detach().clone()) : v;
      s.shadow = std::make_shared<std::array<IValue, 2>>(std::array<IValue, 2>{t, t});
    }
    env[n->output()] = s;
    return;
  }
  env[n->output()] = Sym::constant(v);
}

void TraceImpl::call_method(JNode* n, Env& env) {
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
    torch::jit::Module m = ctx.module;
    shadow_call(n, args, [m, method](std::vector<IValue>& a) mutable { return m.get_method(method)(a); }, env);
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
        // A parameter of this module read earlier by a get_attr (TransformerEncoderLayer's
        // fast-path check reads norm1.weight) made a plain container at the path: the
        // leaf holds the same tensors under the same names, so it takes the container's place.
        if (auto old = gm_->get_submodule(ctx.path)) {
          if (!old->children().empty()) fail(n, "internal: module '" + ctx.path + "' registered twice");
          gm_->remove_submodule(ctx.path);
        }
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

void TraceImpl::emit_call_module(JNode* n, const std::string& path, const std::vector<Sym>& args, Env& env) {
  std::vector<Argument> fx_args;
  for (const auto& a : args) fx_args.push_back(to_arg(a, n));
  Node* fxn = g_.call_module(path, std::move(fx_args), {}, path);
  annotate(fxn, n);
  auto mit = module_by_path_.find(path);
  if (mit != module_by_path_.end()) fxn->meta()["module_type"] = modules_[mit->second].type;
  bind_outputs(n, fxn, env);
  if (mit == module_by_path_.end()) return;
  torch::jit::Module m = modules_[mit->second].module;
  shadow_call(n, args, [m](std::vector<IValue>& a) mutable {
    // Examples must not move batch-norm statistics: the module runs in eval mode.
    const bool was = m.is_training();
    if (was) m.eval();
    struct Restore {
      torch::jit::Module& m;
      bool was;
      ~Restore() { if (was) m.train(true); }
    } restore{m, was};
    return m.forward(a);
  }, env);
}

void TraceImpl::shadow_call(const JNode* n, const std::vector<Sym>& args,
                            const std::function<IValue(std::vector<IValue>&)>& call, Env& env) {
  if (input_shapes_.empty() || n->outputs().size() != 1) return;
  std::array<std::vector<IValue>, 2> sh;
  if (run_shadows(args, 1, [&](torch::jit::Stack& s) {
        std::vector<IValue> a(s.begin(), s.end());
        IValue r = call(a);
        s.assign(1, std::move(r));
      }, &sh))
    attach_shadows(n, sh, env);
}

void TraceImpl::call_function(JNode* n, Env& env) {
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
    shadow_call(n, args, [fn](std::vector<IValue>& a) { return (*fn)(a); }, env);
    return;
  }
  auto& gf = torch::jit::toGraphFunction(*fn);
  frames_.push_back({frames_.back().module_path, frames_.back().module_type, "", qname});
  auto outs = run_graph(*gf.graph(), args);
  frames_.pop_back();
  for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = outs.at(i);
}

void TraceImpl::run_if(JNode* n, Env& env) {
  const Sym& cond = in(n, 0, env);
  torch::jit::Block* b = nullptr;
  if (cond.k == Sym::K::kConst) {
    b = n->blocks()[cond.c.toBool() ? 0 : 1];
  } else {
    // An assertion (`assert cond` / `if cond: ... else: raise`) on traced values
    // is assumed to hold, as torch.fx treats torch._assert: take the branch
    // that does not raise.
    const bool raise0 = raises(n->blocks()[0]), raise1 = raises(n->blocks()[1]);
    if (raise0 == raise1)
      fail(n, input_shapes_.empty()
                  ? "control flow depends on tensor values (data-dependent `if`; if it depends only on shapes, give the "
                    "input shape: model.input_shape, --input-shape, TracerOptions::input_shapes)"
                  : "control flow depends on tensor values or on a dynamic dimension of the input shape (data-dependent `if`)");
    b = n->blocks()[raise0 ? 1 : 0];
  }
  run_block(b, env);
  for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = env.at(b->outputs()[i]);
}

bool TraceImpl::raises(torch::jit::Block* b) {
  for (JNode* n : b->nodes()) if (n->kind() == c10::prim::RaiseException) return true;
  return false;
}

void TraceImpl::run_loop(JNode* n, Env& env) {
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

bool TraceImpl::produces_tensor(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::TensorType) return true;
  for (const auto& c : t->containedTypes()) if (produces_tensor(c)) return true;
  return false;
}

// aten::slice.Tensor(x, dim, start, end, step) of a traced x that keeps every element:
// start None or 0, end None or past any size, step 1.
bool TraceImpl::whole_slice(JNode* n, Env& env) {
  if (n->inputs().size() != 5 || in(n, 0, env).k != Sym::K::kProxy) return false;
  const Sym &start = in(n, 2, env), &end = in(n, 3, env), &step = in(n, 4, env);
  if (start.k != Sym::K::kConst || end.k != Sym::K::kConst || step.k != Sym::K::kConst) return false;
  const bool from_0 = start.c.isNone() || (start.c.isInt() && start.c.toInt() == 0);
  const bool to_end = end.c.isNone() || (end.c.isInt() && end.c.toInt() >= (int64_t{1} << 62));
  return from_0 && to_end && step.c.isInt() && step.c.toInt() == 1;
}

void TraceImpl::run_operator(JNode* n, Env& env) {
  const torch::jit::Operator* op = n->maybeOperator();
  if (!op) fail(n, std::string("unsupported TorchScript construct ") + n->kind().toQualString());
  const auto& schema = op->schema();
  std::string target = schema.name();
  if (!schema.overload_name().empty()) target += "." + schema.overload_name();
  if (cxx_leaf_call(n, env, schema.name())) return;
  if (schema.name() == "aten::is_grad_enabled") {
    // The graph is traced for quantization and training: as with gradients on, so
    // inference-only fused paths (nn.TransformerEncoderLayer's
    // _transformer_encoder_layer_fwd) are not taken, whatever the caller's grad mode.
    env[n->output()] = Sym::constant(IValue(true));
    return;
  }

  if (target == "aten::slice.Tensor" && whole_slice(n, env)) {  // x[:, ...]: the value itself, as torch.export records it
    env[n->output()] = in(n, 0, env);
    return;
  }
  bool any_proxy = false;
  for (size_t i = 0; i < n->inputs().size(); ++i) any_proxy = any_proxy || in(n, i, env).has_proxy();
  bool tensor_out = false;
  for (const JValue* o : n->outputs()) tensor_out = tensor_out || produces_tensor(o->type());
  const bool wrapped = wrapped_function(schema.name()) || wrapped_function(target);

  if (!any_proxy && !tensor_out && !wrapped && op->hasOperation()) {
    // Constant folding: run the op now, as Python would at trace time.
    torch::jit::Stack stack;
    for (size_t i = 0; i < n->inputs().size(); ++i) stack.push_back(materialize(in(n, i, env)));
    // A vararg operator (aten::format) takes its input count on top of the stack,
    // as the interpreter's OPN instruction pushes it.
    if (schema.is_vararg()) stack.push_back(IValue(static_cast<int64_t>(n->inputs().size())));
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
  // Shape specialisation: the op on the examples; a static shape query folds.
  std::array<std::vector<IValue>, 2> sh;
  bool have_sh = false;
  if (!wrapped && !input_shapes_.empty()) {
    std::vector<Sym> ins;
    for (size_t i = 0; i < n->inputs().size(); ++i) ins.push_back(in(n, i, env));
    torch::jit::Operation operation = op->getOperation(n);
    const bool vararg = schema.is_vararg();
    const int64_t nin = static_cast<int64_t>(n->inputs().size());
    have_sh = run_shadows(ins, n->outputs().size(), [&](torch::jit::Stack& s) {
      if (vararg) s.push_back(IValue(nin));
      operation(s);
    }, &sh);
    if (have_sh && !tensor_out && fold_shape_query(n, schema.name(), sh, env)) return;
  }
  std::vector<Argument> args;
  for (size_t i = 0; i < n->inputs().size(); ++i) args.push_back(to_arg(in(n, i, env), n));
  Node* fxn = g_.call_function(target, std::move(args));
  annotate(fxn, n);
  if (n->outputs().empty()) return;
  bind_outputs(n, fxn, env);
  if (have_sh) attach_shadows(n, sh, env);
}

}  // namespace qfx::fx::detail
