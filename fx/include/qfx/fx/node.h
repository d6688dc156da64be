// fx graph IR: Node and Argument, following torch.fx's data model
// (https://pytorch.org/docs/stable/fx.html#torch.fx.Node).
#pragma once

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace qfx::fx {

class Graph;
class Node;

/// The six torch.fx opcodes.
enum class Opcode { kPlaceholder, kGetAttr, kCallFunction, kCallModule, kCallMethod, kOutput };

/// torch.fx spelling of an opcode: "placeholder", "get_attr", "call_function",
/// "call_module", "call_method", "output".
const char* opcode_name(Opcode op);

/// One argument of a node: a reference to another node's value, a constant
/// (any `c10::IValue`: None, bool, int, float, str, device, dtype as int,
/// constant lists), or a list/tuple whose elements are Arguments (used when a
/// list holds node references, e.g. the tensors of `aten::cat`).
struct Argument {
  enum class Kind { kNode, kConst, kList, kTuple };

  /// None.
  Argument() : kind(Kind::kConst) {}
  /// A use of `n`'s value.
  Argument(Node* n) : kind(Kind::kNode), node(n) {}  // NOLINT(runtime/explicit)
  /// A constant.
  Argument(c10::IValue v) : kind(Kind::kConst), value(std::move(v)) {}  // NOLINT
  /// A list (`tuple=false`, element type `elem` for the runtime list, e.g.
  /// `TensorType`) or a tuple of arguments.
  static Argument list(std::vector<Argument> items, c10::TypePtr elem);
  static Argument tuple(std::vector<Argument> items);

  /// True for a use of a node's value.
  bool is_node() const { return kind == Kind::kNode; }
  /// True for a constant (`value`).
  bool is_const() const { return kind == Kind::kConst; }

  Kind kind;                ///< which of the members below is meaningful
  Node* node = nullptr;     ///< kNode: the node whose value is used
  c10::IValue value;        ///< kConst: the constant
  std::vector<Argument> items;  ///< kList / kTuple: the elements
  c10::TypePtr elem_type;   ///< kList: element type of the runtime list (e.g. TensorType)
};

/// Calls `fn(node)` for every node reference inside `a` (recursing into lists).
template <typename Fn>
void for_each_node(const Argument& a, Fn&& fn) {
  if (a.kind == Argument::Kind::kNode) fn(a.node);
  for (const auto& it : a.items) for_each_node(it, fn);
}

/// One operation in a Graph. Created only by Graph; owned by it.
///
/// - placeholder: a graph input; `target` is its name.
/// - get_attr: reads a parameter/buffer; `target` is its dotted path ("layer1.0.conv1.weight").
/// - call_function: `target` is an operator ("aten::add.Tensor", a custom op
///   "ns::op") or a wrapped TorchScript function ("__torch__.topk_decode").
/// - call_module: `target` is the dotted path of a submodule of the GraphModule.
/// - call_method: `target` is a wrapped TorchScript method, qualified by the
///   owning module's path ("_post_process" on the root, "head.decode" below it).
/// - output: `args[0]` is the returned value.
class Node {
 public:
  /// The FX opcode.
  Opcode op() const { return op_; }
  /// Unique, stable, identifier-safe name within the graph.
  const std::string& name() const { return name_; }
  /// What the node calls or reads (see the opcode table above).
  const std::string& target() const { return target_; }
  /// Positional arguments.
  const std::vector<Argument>& args() const { return args_; }
  /// Keyword arguments, in order; for operators they are placed by schema name.
  const std::vector<std::pair<std::string, Argument>>& kwargs() const { return kwargs_; }
  /// Nodes that use this node's value, in the order they started using it.
  const std::vector<Node*>& users() const { return users_; }
  /// Distinct nodes this node reads, in argument order.
  std::vector<Node*> input_nodes() const;
  /// The graph that owns this node.
  Graph* graph() const { return graph_; }
  /// Free-form metadata: "source" (file:line), "module_path", "type" (TorchScript
  /// type string), "shape", ... Values are IValues.
  std::map<std::string, c10::IValue>& meta() { return meta_; }
  const std::map<std::string, c10::IValue>& meta() const { return meta_; }

  /// Replaces the arguments; keeps the users lists of old and new inputs right.
  void set_args(std::vector<Argument> args);
  /// Replaces the keyword arguments; keeps users lists right.
  void set_kwargs(std::vector<std::pair<std::string, Argument>> kwargs);
  /// Replaces every use of `old_input` in this node's args/kwargs by `new_input`.
  void replace_input_with(Node* old_input, Node* new_input);
  /// Rewrites every user of this node to use `replacement` instead. Returns the
  /// users that were changed. `replacement` may not be this node.
  std::vector<Node*> replace_all_uses_with(Node* replacement);
  /// Changes the target string (e.g. when a pass retargets a call_module); drops
  /// the interpreter's cached operator, so the next run resolves the new target.
  void set_target(std::string target) {
    target_ = std::move(target);
    cache_.reset();
  }

  /// Next / previous node in the graph's order (nullptr at the ends).
  Node* next() const;
  Node* prev() const;

  /// Opaque cache slot for the interpreter (resolved operator); not copied.
  std::shared_ptr<void>& cache() const { return cache_; }

 private:
  friend class Graph;
  Node(Graph* g, Opcode op, std::string name, std::string target);
  void add_uses();
  void remove_uses();

  Graph* graph_;
  Opcode op_;
  std::string name_;
  std::string target_;
  std::vector<Argument> args_;
  std::vector<std::pair<std::string, Argument>> kwargs_;
  std::vector<Node*> users_;
  std::map<std::string, c10::IValue> meta_;
  std::list<std::unique_ptr<Node>>::iterator self_;
  mutable std::shared_ptr<void> cache_;
};

}  // namespace qfx::fx
