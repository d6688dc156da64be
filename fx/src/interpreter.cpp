#include "qfx/fx/interpreter.h"

#include <ATen/ScalarOps.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <stdexcept>

#include "qfx/error.h"

namespace qfx::fx {
namespace {

// Builds a runtime list with the element type recorded at trace time, so that
// `Tensor[]`, `int[]`, `Tensor?[]` arguments reach operators with the right type.
c10::IValue make_list(const c10::TypePtr& elem, std::vector<c10::IValue> items) {
  c10::TypePtr t = elem;
  if (!t) {
    t = c10::AnyType::get();
    if (!items.empty() && items[0].isTensor()) t = c10::TensorType::get();
    else if (!items.empty() && items[0].isInt()) t = c10::IntType::get();
    else if (!items.empty() && items[0].isDouble()) t = c10::FloatType::get();
  }
  c10::impl::GenericList list(t);
  list.reserve(items.size());
  for (auto& v : items) list.push_back(std::move(v));
  return c10::IValue(std::move(list));
}

struct ResolvedOp {
  ResolvedOp(std::shared_ptr<torch::jit::Operator> o, torch::jit::Operation f) : op(std::move(o)), operation(std::move(f)) {}
  std::shared_ptr<torch::jit::Operator> op;
  torch::jit::Operation operation;
};

std::shared_ptr<ResolvedOp> resolve_operator(const Node* n) {
  const std::string& t = n->target();
  const auto sep = t.find("::");
  if (sep == std::string::npos) {
    throw UnsupportedOpError("node " + n->name() + ": call_function target '" + t +
                             "' is neither a bound function nor an operator name (ns::op[.overload])");
  }
  const auto dot = t.find('.', sep);
  c10::OperatorName name(t.substr(0, dot), dot == std::string::npos ? "" : t.substr(dot + 1));
  auto op = torch::jit::findOperatorFor(name);
  if (!op) throw UnsupportedOpError("node " + n->name() + ": no registered operator '" + t + "'");
  if (!op->hasOperation()) throw UnsupportedOpError("node " + n->name() + ": operator '" + t + "' needs a TorchScript node to run");
  return std::make_shared<ResolvedOp>(op, op->getOperation());
}

}  // namespace

Interpreter::Interpreter(GraphModule& gm) : gm_(gm) {}

c10::IValue Interpreter::run(std::vector<c10::IValue> inputs) {
  const auto nodes = gm_.graph().nodes();
  size_t n_placeholders = 0;
  for (const Node* n : nodes) n_placeholders += n->op() == Opcode::kPlaceholder;
  if (inputs.size() != n_placeholders) {
    throw DataError("graph expects " + std::to_string(n_placeholders) + " input(s), got " +
                                std::to_string(inputs.size()));
  }
  inputs_ = std::move(inputs);
  next_input_ = 0;
  env_.clear();

  // Free each value after its last user ran (as torch.fx's Interpreter does).
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < nodes.size(); ++i) position[nodes[i]] = i;
  std::vector<std::vector<const Node*>> release_after(nodes.size());
  for (const Node* n : nodes) {
    size_t last = position[n];
    for (const Node* u : n->users()) last = std::max(last, position[u]);
    if (!n->users().empty()) release_after[last].push_back(n);
  }

  c10::IValue result;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i];
    c10::IValue v = run_node(n);
    if (n->op() == Opcode::kOutput) {
      result = std::move(v);
      break;
    }
    env_[n] = std::move(v);
    for (const Node* dead : release_after[i]) env_.erase(dead);
  }
  env_.clear();
  inputs_.clear();
  return result;
}

c10::IValue Interpreter::load_arg(const Argument& a) const {
  switch (a.kind) {
    case Argument::Kind::kNode: {
      auto it = env_.find(a.node);
      if (it == env_.end()) throw ExecutionError("value of node " + a.node->name() + " is not available");
      return it->second;
    }
    case Argument::Kind::kConst: return a.value;
    case Argument::Kind::kList: {
      std::vector<c10::IValue> items;
      for (const auto& it : a.items) items.push_back(load_arg(it));
      return make_list(a.elem_type, std::move(items));
    }
    case Argument::Kind::kTuple: {
      std::vector<c10::IValue> items;
      for (const auto& it : a.items) items.push_back(load_arg(it));
      return c10::ivalue::Tuple::create(std::move(items));
    }
  }
  return {};
}

std::vector<c10::IValue> Interpreter::load_args(const Node* n) const {
  std::vector<c10::IValue> out;
  out.reserve(n->args().size() + n->kwargs().size());
  for (const auto& a : n->args()) out.push_back(load_arg(a));
  for (const auto& kv : n->kwargs()) out.push_back(load_arg(kv.second));
  return out;
}

c10::IValue Interpreter::run_node(const Node* n) {
  try {
    switch (n->op()) {
      case Opcode::kPlaceholder: return inputs_.at(next_input_++);
      case Opcode::kGetAttr: return get_attr(n);
      case Opcode::kCallFunction: return call_function(n, {});
      case Opcode::kCallModule: return call_module(n, load_args(n));
      case Opcode::kCallMethod: return call_method(n, load_args(n));
      case Opcode::kOutput: return load_arg(n->args().at(0));
    }
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw ExecutionError("node " + n->name() + " (" + opcode_name(n->op()) + " " + n->target() +
                         ") failed: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw ExecutionError("node " + n->name() + " (" + opcode_name(n->op()) + " " + n->target() + ") failed: " + e.what());
  }
  return {};
}

c10::IValue Interpreter::get_attr(const Node* n) { return gm_.get_attr(n->target()); }

c10::IValue Interpreter::call_function(const Node* n, std::vector<c10::IValue> args) {
  if (n->target() == "getitem") {  // Python's operator.getitem on a tuple or list value
    c10::IValue container = load_arg(n->args().at(0));
    const int64_t i = load_arg(n->args().at(1)).toInt();
    if (container.isTuple()) return container.toTupleRef().elements().at(static_cast<size_t>(i));
    if (container.isList()) return container.toListRef().at(static_cast<size_t>(i));
    throw ExecutionError("node " + n->name() + ": getitem on a value that is neither tuple nor list");
  }
  if (const CallFn* fn = gm_.function_fn(n->target())) {
    auto a = load_args(n);
    return (*fn)(a);
  }
  auto& cache = n->cache();
  if (!cache) cache = resolve_operator(n);
  auto* op = static_cast<ResolvedOp*>(cache.get());
  const c10::FunctionSchema& schema = op->op->schema();

  torch::jit::Stack stack;
  stack.reserve(schema.arguments().size());
  for (const auto& a : n->args()) {
    stack.push_back(load_arg(a));
    // A number where the schema takes a Tensor (torch.export records x * -10000.0 as
    // aten::mul.Tensor(x, -10000.0)): a 0-dim wrapped number, as PyTorch passes it,
    // so type promotion treats it as a scalar.
    const size_t i = stack.size() - 1;
    if (i < schema.arguments().size() && (stack[i].isDouble() || stack[i].isInt()) &&
        schema.arguments()[i].type()->kind() == c10::TypeKind::TensorType) {
      at::Tensor t = at::scalar_to_tensor(stack[i].toScalar());
      t.unsafeGetTensorImpl()->set_wrapped_number(true);
      stack[i] = std::move(t);
    }
  }
  // Place kwargs by name; fill the rest from schema defaults.
  for (size_t i = n->args().size(); i < schema.arguments().size(); ++i) {
    const auto& sa = schema.arguments()[i];
    bool found = false;
    for (const auto& kv : n->kwargs()) {
      if (kv.first == sa.name()) {
        stack.push_back(load_arg(kv.second));
        found = true;
        break;
      }
    }
    if (!found) {
      if (!sa.default_value()) {
        throw ExecutionError("node " + n->name() + ": missing argument '" + sa.name() + "' of " + n->target());
      }
      stack.push_back(*sa.default_value());
    }
  }
  op->operation(stack);
  if (schema.returns().size() == 1) return std::move(stack.back());
  if (schema.returns().empty()) return c10::IValue();
  return c10::ivalue::Tuple::create(std::vector<c10::IValue>(stack.end() - schema.returns().size(), stack.end()));
}

c10::IValue Interpreter::call_module(const Node* n, std::vector<c10::IValue> args) {
  return gm_.module_fn(n->target())(args);
}

c10::IValue Interpreter::call_method(const Node* n, std::vector<c10::IValue> args) {
  const CallFn* fn = gm_.method_fn(n->target());
  if (!fn) throw UnsupportedOpError("node " + n->name() + ": no wrapped method bound to '" + n->target() + "'");
  return (*fn)(args);
}

}  // namespace qfx::fx
