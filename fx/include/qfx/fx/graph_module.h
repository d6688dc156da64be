// fx GraphModule: a torch::nn::Module that owns a Graph and the modules it calls,
// as torch.fx.GraphModule.
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "qfx/fx/graph.h"

namespace qfx::fx {

/// A callable bound to a call_module / call_method / call_function target. Takes
/// the node's evaluated arguments (positional, kwargs already placed) and returns
/// its value (a Tensor, a tuple, None, ...).
using CallFn = std::function<c10::IValue(std::vector<c10::IValue>&)>;

/// The CallFn of a module with `at::Tensor forward(const at::Tensor&)` (const or
/// not): calls it on the node's first argument, which must be a tensor.
template <typename M>
CallFn tensor_call_fn(std::shared_ptr<M> m) {
  return [m = std::move(m)](std::vector<c10::IValue>& a) -> c10::IValue { return m->forward(a.at(0).toTensor()); };
}

/// A torch::nn::Module that holds a Graph and the module tree the graph calls.
///
/// - Submodules live at dotted paths ("layer1.0.conv1"); intermediate containers
///   are created as plain modules, so `named_parameters()` gives the same dotted
///   names as the original PyTorch model.
/// - `forward` runs the graph with `Interpreter` (libtorch ops, autograd on).
/// - `train()` / `eval()` reach every submodule and every TorchScript module whose
///   wrapped code the graph calls, so wrapped calls see the current mode.
class GraphModule : public torch::nn::Module {
 public:
  /// An empty graph module (build its graph with `graph()`).
  GraphModule();
  explicit GraphModule(std::shared_ptr<Graph> graph);

  /// The graph this module runs.
  Graph& graph() { return *graph_; }
  const Graph& graph() const { return *graph_; }

  /// Registers `module` at dotted `path` (creating containers) and binds `fn` as
  /// what call_module nodes targeting `path` run. Throws `ArgumentError`
  /// if something is already registered at `path`.
  void add_submodule(const std::string& path, std::shared_ptr<torch::nn::Module> module, CallFn fn);
  /// Replaces the module at dotted `path` (which must exist) and its callable.
  /// Throws `ArgumentError` naming `path` if nothing is registered there.
  void replace_submodule(const std::string& path, std::shared_ptr<torch::nn::Module> module, CallFn fn);
  /// Removes the module at dotted `path` and its callable (no-op if absent).
  /// Graph nodes that still target it fail when run: erase them first.
  void remove_submodule(const std::string& path);
  /// The module at dotted `path`, or nullptr.
  std::shared_ptr<torch::nn::Module> get_submodule(const std::string& path) const;
  /// The callable for call_module `path`. Throws `ArgumentError` naming it.
  const CallFn& module_fn(const std::string& path) const;

  /// Registers a parameter (`is_buffer=false`) or buffer at dotted `path`. The
  /// tensor is held as is (no copy): it is shared with whoever else holds it.
  void add_tensor(const std::string& path, const at::Tensor& tensor, bool is_buffer);
  /// The parameter or buffer at dotted `path`. Throws `ArgumentError`.
  at::Tensor get_attr(const std::string& path) const;
  /// True if a parameter or buffer is registered at `path`.
  bool has_attr(const std::string& path) const;

  /// Binds the callable of call_method target `target` (a wrapped method).
  void add_method(const std::string& target, CallFn fn);
  /// Binds a wrapped call_function target (a TorchScript function). Targets not
  /// bound here are resolved as registered operators ("aten::add.Tensor").
  void add_function(const std::string& target, CallFn fn);
  /// Callables of wrapped methods / functions, or nullptr.
  const CallFn* method_fn(const std::string& target) const;
  const CallFn* function_fn(const std::string& target) const;

  /// The TorchScript model this module was traced from (an Object IValue), or
  /// None (C++-traced or hand-built modules). `save_graph_module` stores it so
  /// wrapped methods, functions and modules can be rebuilt in another process;
  /// `copy()` shares it.
  void set_script_root(c10::IValue root) { script_root_ = std::move(root); }
  const c10::IValue& script_root() const { return script_root_; }

  /// Called with the new mode whenever `train(on)` runs (used to keep wrapped
  /// TorchScript modules in step).
  void add_train_hook(std::function<void(bool)> hook);
  /// Sets train (`on`) or eval mode on every submodule and runs the train hooks.
  void train(bool on = true) override;

  /// A new GraphModule over a copy of the graph (`Graph::copy`) that shares this
  /// one's submodules, the tensors its get_attr nodes read, and its wrapped
  /// callables and train hooks, in a module tree of its own: replacing a
  /// submodule of the copy leaves this module untouched (how convert_fx builds
  /// the converted model without consuming the prepared one).
  std::shared_ptr<GraphModule> copy() const;

  /// Runs the graph on `inputs` (one per placeholder, in order) and returns the
  /// output value. Errors as `Interpreter::run` (qfx::ExecutionError naming the
  /// node that failed).
  c10::IValue forward(std::vector<c10::IValue> inputs);
  /// Convenience for a one-input, one-tensor-output graph.
  at::Tensor forward(const at::Tensor& input);

  /// torch.fx's `recompile()`. qfx interprets the graph instead of generating
  /// Python code, so graph edits take effect on the next `forward` without it;
  /// the only cache is each node's resolved operator, which `Node::set_target`
  /// drops. Provided so torch.fx-style passes read the same: it lints the graph
  /// (InternalError naming the node on a broken invariant).
  void recompile() const { graph_->lint(); }

  /// The readable forward function (see `Graph::python_code`).
  std::string code() const { return graph_->python_code(); }
  /// Prints the graph's table (see `Graph::print_tabular`) with a module column:
  /// each call_module node's module class (`module_type_name`: "Conv2d", a
  /// user's class), as torch.fx users read it from `gm.get_submodule(target)`.
  void print_tabular(std::ostream& os) const;

 private:
  std::shared_ptr<torch::nn::Module> container_for(const std::string& path, std::string* leaf_name, bool create);

  std::shared_ptr<Graph> graph_;
  std::unordered_map<std::string, CallFn> module_fns_;
  std::unordered_map<std::string, CallFn> method_fns_;
  std::unordered_map<std::string, CallFn> function_fns_;
  std::vector<std::function<void(bool)>> train_hooks_;
  c10::IValue script_root_;
};

}  // namespace qfx::fx
