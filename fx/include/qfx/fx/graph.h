// fx graph IR: the Graph that owns Nodes in topological order, as torch.fx.Graph.
#pragma once

#include <functional>
#include <iosfwd>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "qfx/fx/node.h"

namespace qfx::fx {

/// A graph of Nodes in execution (topological) order. The only way to create
/// nodes. New nodes go at the insertion point: the end of the graph unless an
/// `InsertPoint` guard says otherwise.
class Graph {
 public:
  /// An empty graph.
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// A graph input named `name` (made unique). `type` is informative (e.g. "Tensor").
  Node* placeholder(const std::string& name, const std::string& type = "Tensor");
  /// Reads the parameter/buffer at dotted path `target`.
  Node* get_attr(const std::string& target, const std::string& name_hint = "");
  /// Calls operator or wrapped function `target` (see Node).
  Node* call_function(const std::string& target, std::vector<Argument> args,
                      std::vector<std::pair<std::string, Argument>> kwargs = {},
                      const std::string& name_hint = "");
  /// Calls the submodule at dotted path `target`.
  Node* call_module(const std::string& target, std::vector<Argument> args,
                    std::vector<std::pair<std::string, Argument>> kwargs = {},
                    const std::string& name_hint = "");
  /// Calls the wrapped method `target` (see Node).
  Node* call_method(const std::string& target, std::vector<Argument> args,
                    std::vector<std::pair<std::string, Argument>> kwargs = {},
                    const std::string& name_hint = "");
  /// The graph's result. A graph has at most one output node; it must be last.
  Node* output(Argument result);

  /// Removes `n`. Throws `ArgumentError` if `n` still has users.
  void erase_node(Node* n);
  /// Every use of `old_node` now reads `new_node`; returns the changed users.
  std::vector<Node*> replace_all_uses_with(Node* old_node, Node* new_node) {
    return old_node->replace_all_uses_with(new_node);
  }
  /// Removes nodes without users that have no side effects (everything but
  /// placeholders, the output, and call_function targets ending in '_' which
  /// mutate their input). Returns the number removed.
  int eliminate_dead_code();

  /// Nodes in order (a snapshot: safe to erase while iterating it).
  std::vector<Node*> nodes() const;
  /// Number of nodes.
  size_t size() const { return nodes_.size(); }
  /// The node named `name`, or nullptr.
  Node* find_node(const std::string& name) const;
  /// The output node, or nullptr if none yet.
  Node* output_node() const;
  /// Placeholders in order.
  std::vector<Node*> placeholders() const;

  /// Checks invariants: every argument is defined before its use and belongs to
  /// this graph, users lists match the arguments, names are unique, exactly one
  /// output node and it is last. Throws `InternalError` naming the node.
  void lint() const;

  /// Prints the table torch.fx's `print_tabular` prints: opcode, name, target,
  /// args, kwargs; plus shape and dtype columns once a node's meta has them
  /// (ShapeProp records them), and a module column (the class of the module a
  /// call_module node calls) when `module_type` is given and the graph has a
  /// call_module node (`GraphModule::print_tabular` gives it).
  void print_tabular(std::ostream& os, const std::function<std::string(const Node&)>& module_type = {}) const;
  /// A readable Python-like `forward` function for the graph.
  std::string python_code(const std::string& fn_name = "forward") const;

  /// RAII guard: nodes created while it lives are inserted before `before`
  /// (nullptr = at the end). Restores the previous insertion point on exit.
  class InsertPoint {
   public:
    /// Inserts into `g` before `before` (nullptr: at the end) until destroyed.
    InsertPoint(Graph& g, Node* before);
    ~InsertPoint();
   private:
    Graph& g_;
    Node* saved_;
  };
  /// The `before` argument that makes an InsertPoint insert right after `n`
  /// (`InsertPoint ip(g, Graph::after(n))`).
  static Node* after(Node* n) { return n->next(); }
  /// torch.fx's `with graph.inserting_before(n):` as an RAII guard:
  /// `auto guard = g.inserting_before(n);` (C++17 guaranteed elision: the guard
  /// is neither copied nor moved).
  InsertPoint inserting_before(Node* n) { return InsertPoint(*this, n); }
  /// torch.fx's `graph.inserting_after(n)`: new nodes go right after `n`, in
  /// creation order (before the output node if `n` is last).
  InsertPoint inserting_after(Node* n) { return InsertPoint(*this, n->next()); }

  /// A new graph with a copy of every node, in order: same names, targets,
  /// constants and meta; node references point at the copies (torch.fx's
  /// `Graph.graph_copy`). Interpreter caches are not copied.
  std::unique_ptr<Graph> copy() const;

  /// Makes `hint` a unique identifier-safe node name.
  std::string unique_name(const std::string& hint);

 private:
  friend class Node;
  Node* create(Opcode op, const std::string& target, std::vector<Argument> args,
               std::vector<std::pair<std::string, Argument>> kwargs, const std::string& name_hint);

  std::list<std::unique_ptr<Node>> nodes_;
  Node* insert_before_ = nullptr;  // nullptr: append
  std::unordered_map<std::string, Node*> by_name_;
  std::unordered_map<std::string, int> name_counts_;
};

/// Renders an argument the way torch.fx prints it: node names, Python literals,
/// lists in brackets and tuples in parentheses.
std::string format_argument(const Argument& a);

/// The keys of the dictionary a graph returns (torchvision's segmentation models
/// return {"out": ..., "aux": ...}): the output node then returns the tuple of the
/// values in this order, and its meta["output_keys"] lists the keys (as strings).
/// Empty when the graph returns no dictionary.
std::vector<std::string> output_keys(const Graph& g);
/// Records `keys` (strings, or ints written in decimal) on output node `output`.
void set_output_keys(Node* output, const std::vector<c10::IValue>& keys);

}  // namespace qfx::fx
