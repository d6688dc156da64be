// fx Interpreter: runs a GraphModule node by node, as torch.fx.Interpreter.
#pragma once

#include <unordered_map>
#include <vector>

#include "qfx/fx/graph_module.h"

namespace qfx::fx {

/// Executes a GraphModule's graph with libtorch ops (autograd enabled unless the
/// caller disabled it). Subclass and override the `run_node` family to observe or
/// change execution (shape propagation, calibration, debugging), as in torch.fx.
///
/// call_function targets resolve, in order, to a callable bound with
/// `GraphModule::add_function`, or to a registered operator ("ns::name.overload");
/// kwargs are placed by the operator's schema. Values are freed after their last use.
class Interpreter {
 public:
  explicit Interpreter(GraphModule& gm);
  virtual ~Interpreter() = default;

  /// Runs the graph. `inputs` must have one value per placeholder. Throws
  /// qfx::DataError on a wrong input count, qfx::UnsupportedOpError naming the
  /// node for a target that cannot be resolved, and qfx::ExecutionError naming
  /// the node when an op fails (a qfx::Error raised inside passes unchanged).
  c10::IValue run(std::vector<c10::IValue> inputs);

 protected:
  /// Dispatches on the opcode; returns the node's value.
  virtual c10::IValue run_node(const Node* n);
  virtual c10::IValue call_function(const Node* n, std::vector<c10::IValue> args);
  virtual c10::IValue call_module(const Node* n, std::vector<c10::IValue> args);
  virtual c10::IValue call_method(const Node* n, std::vector<c10::IValue> args);
  virtual c10::IValue get_attr(const Node* n);

  /// Evaluates an argument in the current environment.
  c10::IValue load_arg(const Argument& a) const;
  /// Evaluates positional args and places kwargs (for operators, by schema).
  std::vector<c10::IValue> load_args(const Node* n) const;

  GraphModule& gm_;
  std::unordered_map<const Node*, c10::IValue> env_;
  std::vector<c10::IValue> inputs_;
  size_t next_input_ = 0;
};

}  // namespace qfx::fx
