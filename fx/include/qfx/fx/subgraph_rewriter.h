// Pattern matching and rewriting on fx graphs, with torch.fx's semantics
// (torch.fx.subgraph_rewriter.replace_pattern and
// torch.fx.passes.utils.matcher_utils.SubgraphMatcher).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"

namespace qfx::fx {

/// A pattern or replacement written as a C++ function of tensors.
using TensorFn = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

/// Traces `fn` into a GraphModule (libtorch's JIT tracer, as `trace_module`):
/// one placeholder per example input, one call_function node per aten op
/// (`torch::relu(x)` -> `aten::relu`), constants as literal arguments, tensors
/// the function creates as get_attr nodes. `example_inputs` only drive the trace
/// (default: one float [2, 3, 4, 5] tensor per input); ops that depend on shapes
/// are specialised to them, as any JIT trace is. Throws qfx::TraceError.
std::shared_ptr<GraphModule> trace_function(const TensorFn& fn, int num_inputs,
                                            std::vector<at::Tensor> example_inputs = {});

/// Traces a pattern or replacement written as one TorchScript function:
///   "def pattern(x, w):\n    return torch.relu(torch.conv2d(x, w))\n"
/// The function is compiled by libtorch's TorchScript compiler (as a `forward`
/// method of an empty module) and traced with QuantizationTracer: one
/// placeholder per argument (named after it), aten ops as call_function nodes,
/// the same targets a TorchScript model's graph has. Throws qfx::TraceError
/// naming the problem if `source` holds no `def`, does not compile, or cannot
/// be traced.
std::shared_ptr<GraphModule> trace_script_function(const std::string& source);

/// One occurrence of a pattern in a graph.
struct Match {
  /// The graph nodes the pattern's outputs matched (one per pattern output).
  std::vector<Node*> returning_nodes;
  /// The graph values bound to the pattern's placeholders, in placeholder order.
  std::vector<Node*> placeholder_nodes;
  /// Pattern node -> graph node, for every pattern node but the output.
  std::map<const Node*, Node*> nodes_map;
};

/// Options of SubgraphMatcher.
struct MatchOptions {
  /// Drop matches that share a (non-placeholder) node with an earlier match, in
  /// graph order, so every match can be replaced independently.
  bool remove_overlapping_matches = true;
  /// Literal arguments (numbers, lists, strings) match anything when true;
  /// by default they must be equal.
  bool ignore_literals = false;
  /// What `replace_pattern` does when the pattern matches nowhere (SubgraphMatcher
  /// itself just returns no match): kWarn (default) issues a libtorch warning
  /// (TORCH_WARN, stderr unless the program installs its own c10 warning
  /// handler) that names the ops the graph lacks and, where nn modules play
  /// their part (an `aten::relu` pattern on a graph of `ReLU` call_module
  /// leaves), says so; kError throws ArgumentError with that message;
  /// kIgnore returns the empty list as torch.fx does.
  enum class OnNoMatch { kWarn, kError, kIgnore };
  OnNoMatch on_no_match = OnNoMatch::kWarn;
};

/// Finds every occurrence of `pattern` in a graph (torch.fx SubgraphMatcher):
/// - matching follows the use-def structure from the pattern's outputs back to
///   its placeholders; a placeholder matches any value (a node, not a literal),
///   the same placeholder must match the same value everywhere;
/// - other nodes match nodes of the same opcode and target, with positional and
///   keyword arguments matching pairwise (literals equal unless ignored); a pure
///   aten op also matches its in-place variant (`aten::relu` matches
///   `aten::relu_`, what `ReLU(inplace=true)` traces to) when nothing else reads
///   the tensor it overwrites;
/// - a match is refused if one of its internal nodes (not a returned one) is
///   used outside the match.
/// The pattern graph must outlive the matcher. Throws ArgumentError if
/// `pattern` has no output node or returns something other than nodes.
class SubgraphMatcher {
 public:
  explicit SubgraphMatcher(const Graph& pattern, MatchOptions options = {});
  /// The matches in `graph`, in the graph order of their first returning node.
  std::vector<Match> match(const Graph& graph) const;

 private:
  bool match_node(const Node* pn, Node* gn, Match& m) const;
  bool match_arg(const Argument& pa, const Argument& ga, Match& m) const;
  const Graph& pattern_;
  MatchOptions options_;
  std::vector<const Node*> outputs_;
  std::vector<const Node*> placeholders_;
};

/// What replace_pattern did at one match.
struct ReplacedMatch {
  /// Name of the graph node the (first) pattern output matched (erased now).
  std::string anchor;
  /// Pattern node name -> name of the graph node it matched (those erased now,
  /// except values bound to placeholders).
  std::map<std::string, std::string> nodes_map;
  /// The nodes inserted from the replacement (live in the graph).
  std::vector<Node*> replacements;
};

/// Replaces every (non-overlapping) occurrence of `pattern` in `gm` by
/// `replacement` (torch.fx's replace_pattern): the replacement's nodes are
/// inserted before the match's first returning node with its placeholders bound
/// to the match's values, uses of the matched outputs are redirected, matched
/// nodes are erased, dead code is eliminated and the graph is linted.
/// get_attr nodes of the replacement copy their tensor into `gm` (as buffers
/// named `_rewrite_const_N`), call_module nodes register the same module (shared)
/// under `_rewrite_module_N`. `pattern` and `replacement` must have the same
/// number of placeholders and of outputs (ArgumentError otherwise).
/// Returns one entry per replaced match; none is reported as
/// `options.on_no_match` says.
std::vector<ReplacedMatch> replace_pattern(GraphModule& gm, const GraphModule& pattern, const GraphModule& replacement,
                                           MatchOptions options = {});
/// Convenience: traces `pattern` and `replacement` (trace_function with
/// `num_inputs` inputs) and calls the overload above.
std::vector<ReplacedMatch> replace_pattern(GraphModule& gm, const TensorFn& pattern, const TensorFn& replacement,
                                           int num_inputs = 1, MatchOptions options = {});

}  // namespace qfx::fx
