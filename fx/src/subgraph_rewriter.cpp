// SubgraphMatcher and replace_pattern (torch.fx semantics; see subgraph_rewriter.h).
#include "qfx/fx/subgraph_rewriter.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "qfx/error.h"
#include "qfx/fx/module_matcher.h"
#include "qfx/fx/tracer.h"

namespace qfx::fx {
namespace {

// The pattern's returned nodes: the output node's argument, a node or a tuple/list of nodes.
std::vector<const Node*> returned_nodes(const Graph& g, const char* what) {
  const Node* out = g.output_node();
  if (!out || out->args().empty()) throw ArgumentError(std::string(what) + " graph has no output");
  const Argument& a = out->args()[0];
  std::vector<const Node*> nodes;
  if (a.is_node()) {
    nodes.push_back(a.node);
  } else if (a.kind == Argument::Kind::kTuple || a.kind == Argument::Kind::kList) {
    for (const auto& it : a.items) {
      if (!it.is_node()) throw ArgumentError(std::string(what) + " graph returns a literal; patterns return values");
      nodes.push_back(it.node);
    }
  } else {
    throw ArgumentError(std::string(what) + " graph returns a literal; patterns return values");
  }
  return nodes;
}

// Why `pattern` matched nothing in `gm`, as far as one can tell: ops the graph lacks
// (with the nn modules that play their part), else a structural mismatch.
std::string no_match_message(const Graph& pattern, const GraphModule& gm) {
  std::vector<std::string> missing, present;
  for (const Node* pn : pattern.nodes()) {
    if (pn->op() != Opcode::kCallFunction && pn->op() != Opcode::kCallMethod) continue;
    bool found = false;
    for (const Node* gn : gm.graph().nodes())
      found |= gn->op() == pn->op() && (gn->target() == pn->target() || gn->target() == pn->target() + "_");
    (found ? present : missing).push_back(pn->target());
  }
  std::string msg = "replace_pattern: the pattern matched nothing";
  if (missing.empty()) {
    msg += ": its ops occur in the graph but not connected as in the pattern (or a matched node's value is also used "
           "outside the match, or a literal argument differs; MatchOptions::ignore_literals)";
    return msg;
  }
  msg += ": the graph has no";
  for (size_t i = 0; i < missing.size(); ++i) msg += (i ? ", " : " ") + missing[i];
  msg += " node";
  // torch.nn modules are call_module leaves: name those whose class is the missing op's name.
  std::set<std::string> modules;
  for (const std::string& t : missing) {
    std::string op = t.substr(t.rfind(':') == std::string::npos ? 0 : t.rfind(':') + 1);
    if (const auto dot = op.find('.'); dot != std::string::npos) op.resize(dot);
    for (const Node* gn : gm.graph().nodes()) {
      std::string cls = module_type_name(*gn, gm), lower;
      for (char c : cls) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!cls.empty() && lower == op) modules.insert(cls);
    }
  }
  if (!modules.empty()) {
    msg += "; the graph calls";
    for (const auto& m : modules) msg += " " + m;
    msg += " modules instead (call_module leaves, as in torch.fx): match them with match_module_pattern";
  }
  return msg;
}

}  // namespace

std::shared_ptr<GraphModule> trace_function(const TensorFn& fn, int num_inputs, std::vector<at::Tensor> example_inputs) {
  if (example_inputs.empty())
    for (int i = 0; i < num_inputs; ++i) example_inputs.push_back(at::randn({2, 3, 4, 5}));
  if (static_cast<int>(example_inputs.size()) != num_inputs)
    throw ArgumentError("trace_function: " + std::to_string(example_inputs.size()) + " example inputs for " +
                                std::to_string(num_inputs) + " inputs");
  std::vector<c10::IValue> in(example_inputs.begin(), example_inputs.end());
  auto holder = std::make_shared<torch::nn::Module>("TensorFunction");
  return trace_module(
      holder,
      [fn](std::vector<c10::IValue> args) -> c10::IValue {
        std::vector<at::Tensor> ts;
        for (auto& a : args) ts.push_back(a.toTensor());
        return fn(ts);
      },
      in);
}

// The first "def NAME(" (with optional spaces: "def  f ( ") in `source`: its start,
// and the position after the "(" and the spaces that follow. A linear scan.
static bool find_def_header(const std::string& source, size_t* start, size_t* after) {
  auto space = [&](size_t i) { return i < source.size() && std::isspace(static_cast<unsigned char>(source[i])); };
  auto ident = [&](size_t i, bool first) {
    if (i >= source.size()) return false;
    const unsigned char c = static_cast<unsigned char>(source[i]);
    return c == '_' || std::isalpha(c) || (!first && std::isdigit(c));
  };
  for (size_t at = source.find("def"); at != std::string::npos; at = source.find("def", at + 1)) {
    size_t i = at + 3;
    if (!space(i)) continue;
    while (space(i)) ++i;
    if (!ident(i, true)) continue;
    while (ident(i, false)) ++i;
    while (space(i)) ++i;
    if (i >= source.size() || source[i] != '(') continue;
    ++i;
    while (space(i)) ++i;
    *start = at;
    *after = i;
    return true;
  }
  return false;
}

std::shared_ptr<GraphModule> trace_script_function(const std::string& source) {
  // "def NAME(args" -> "def forward(self, args": the function becomes the forward
  // of an empty scripted module, which the TorchScript tracer takes.
  size_t start = 0, after = 0;
  if (!find_def_header(source, &start, &after))
    throw TraceError("trace_script_function: the source holds no 'def NAME(...):' function");
  const bool no_args = after < source.size() && source[after] == ')';
  const std::string method = source.substr(0, start) + "def forward(self" + (no_args ? "" : ", ") + source.substr(after);
  torch::jit::Module module("__torch__.QfxScriptFunction");
  try {
    module.define(method);
  } catch (const c10::Error& e) {
    throw TraceError(std::string("trace_script_function: the TorchScript source does not compile: ") +
                     e.what_without_backtrace());
  } catch (const std::exception& e) {  // torch::jit::ErrorReport: the line and a caret
    throw TraceError(std::string("trace_script_function: the TorchScript source does not compile: ") + e.what());
  }
  module.eval();
  return QuantizationTracer().trace(module);
}

SubgraphMatcher::SubgraphMatcher(const Graph& pattern, MatchOptions options)
    : pattern_(pattern), options_(options), outputs_(returned_nodes(pattern, "pattern")) {
  for (Node* p : pattern.placeholders()) placeholders_.push_back(p);
}

bool SubgraphMatcher::match_arg(const Argument& pa, const Argument& ga, Match& m) const {
  if (pa.is_node()) return ga.is_node() && match_node(pa.node, ga.node, m);
  if (ga.is_node()) return false;
  if (pa.kind != ga.kind) return false;
  if (pa.is_const()) return options_.ignore_literals || format_argument(pa) == format_argument(ga);
  if (pa.items.size() != ga.items.size()) return false;
  for (size_t i = 0; i < pa.items.size(); ++i)
    if (!match_arg(pa.items[i], ga.items[i], m)) return false;
  return true;
}

// "aten::relu_" -> "aten::relu", "aten::add_.Tensor" -> "aten::add.Tensor"; other
// targets unchanged. In-place aten ops end their name (before the overload) in '_'.
static std::string pure_target(const std::string& t) {
  if (t.rfind("aten::", 0) != 0) return t;
  const size_t dot = t.find('.');
  const size_t end = dot == std::string::npos ? t.size() : dot;
  if (end < 8 || t[end - 1] != '_' || t[end - 2] == '_') return t;
  return t.substr(0, end - 1) + t.substr(end);
}

// A graph node matches a pattern node's target: the same target, or the in-place
// variant of a pure aten op (ReLU(inplace=True) traces to aten::relu_) when the
// tensor it overwrites is read by nothing else, so replacing it with a pure op
// changes no other reader's value.
static bool same_target(const Node* pn, const Node* gn) {
  if (pn->target() == gn->target()) return true;
  if (gn->op() != Opcode::kCallFunction || pure_target(gn->target()) != pn->target() || pure_target(pn->target()) != pn->target())
    return false;
  if (gn->args().empty() || !gn->args()[0].is_node()) return false;
  return gn->args()[0].node->users().size() == 1;
}

bool SubgraphMatcher::match_node(const Node* pn, Node* gn, Match& m) const {
  auto it = m.nodes_map.find(pn);
  if (it != m.nodes_map.end()) return it->second == gn;
  for (const auto& kv : m.nodes_map)
    if (kv.second == gn) return false;  // two pattern nodes never share a graph node
  if (pn->op() == Opcode::kPlaceholder) {
    m.nodes_map[pn] = gn;
    return true;
  }
  if (pn->op() != gn->op() || !same_target(pn, gn)) return false;
  if (pn->args().size() != gn->args().size() || pn->kwargs().size() != gn->kwargs().size()) return false;
  m.nodes_map[pn] = gn;
  for (size_t i = 0; i < pn->args().size(); ++i)
    if (!match_arg(pn->args()[i], gn->args()[i], m)) return false;
  for (const auto& kv : pn->kwargs()) {
    auto g = std::find_if(gn->kwargs().begin(), gn->kwargs().end(), [&](const auto& e) { return e.first == kv.first; });
    if (g == gn->kwargs().end() || !match_arg(kv.second, g->second, m)) return false;
  }
  return true;
}

std::vector<Match> SubgraphMatcher::match(const Graph& graph) const {
  const std::vector<Node*> order = graph.nodes();
  std::vector<Match> found;
  std::set<const Node*> taken;  // non-placeholder nodes of accepted matches
  // Binds pattern outputs k, k+1, ... (output 0 is anchored by the loop below),
  // trying every graph node for each: patterns with several outputs are small.
  std::function<bool(size_t, Match&)> bind = [&](size_t k, Match& m) -> bool {
    if (k == outputs_.size()) return true;
    for (Node* gn : order) {
      if (gn->op() == Opcode::kOutput) continue;
      Match trial = m;
      if (match_node(outputs_[k], gn, trial) && bind(k + 1, trial)) {
        m = std::move(trial);
        return true;
      }
    }
    return false;
  };
  for (Node* anchor : order) {
    if (anchor->op() == Opcode::kOutput || anchor->op() == Opcode::kPlaceholder) continue;
    Match m;
    if (!match_node(outputs_[0], anchor, m)) continue;
    if (outputs_.size() > 1 && !bind(1, m)) continue;
    // Internal nodes may not be used outside the match.
    std::set<const Node*> inside;
    for (const auto& kv : m.nodes_map)
      if (kv.first->op() != Opcode::kPlaceholder) inside.insert(kv.second);
    bool escapes = false;
    for (const auto& kv : m.nodes_map) {
      if (kv.first->op() == Opcode::kPlaceholder) continue;
      if (std::find(outputs_.begin(), outputs_.end(), kv.first) != outputs_.end()) continue;
      for (const Node* u : kv.second->users()) escapes |= !inside.count(u);
    }
    if (escapes) continue;
    if (options_.remove_overlapping_matches) {
      bool overlaps = false;
      for (const Node* n : inside) overlaps |= taken.count(n) > 0;
      if (overlaps) continue;
      taken.insert(inside.begin(), inside.end());
    }
    for (const Node* o : outputs_) m.returning_nodes.push_back(m.nodes_map.at(o));
    for (const Node* p : placeholders_) {
      auto it = m.nodes_map.find(p);
      m.placeholder_nodes.push_back(it == m.nodes_map.end() ? nullptr : it->second);
    }
    found.push_back(std::move(m));
  }
  return found;
}

namespace {

// Checks that `replacement` takes as many inputs and returns as many values as `pattern`.
void check_signatures(const Graph& pattern, const Graph& replacement) {
  const size_t r_outputs = returned_nodes(replacement, "replacement").size();
  const size_t r_inputs = replacement.placeholders().size();
  if (r_inputs != pattern.placeholders().size())
    throw ArgumentError("replace_pattern: the pattern has " + std::to_string(pattern.placeholders().size()) +
                        " inputs, the replacement " + std::to_string(r_inputs));
  if (r_outputs != returned_nodes(pattern, "pattern").size())
    throw ArgumentError("replace_pattern: the pattern and the replacement return different numbers of values");
}

// Copies `replacement`'s graph in place of each match of a pattern in `gm`'s graph, one match at a time.
class PatternReplacer {
 public:
  PatternReplacer(GraphModule& gm, const GraphModule& replacement)
      : gm_(gm),
        g_(gm.graph()),
        replacement_(replacement),
        r_outputs_(returned_nodes(replacement.graph(), "replacement")),
        r_placeholders_(replacement.graph().placeholders()) {
    size_t i = 0;
    for (Node* n : g_.nodes()) pos_[n] = i++;
  }

  // Inserts the replacement before the match's first returned node and reroutes the match's outputs to it.
  ReplacedMatch replace(const Match& m) {
    ReplacedMatch rec;
    for (const auto& kv : m.nodes_map) rec.nodes_map[kv.first->name()] = kv.second->name();
    rec.anchor = m.returning_nodes[0]->name();
    Node* first = *std::min_element(m.returning_nodes.begin(), m.returning_nodes.end(),
                                    [&](Node* a, Node* b) { return pos_.at(a) < pos_.at(b); });
    std::unordered_map<const Node*, Node*> env;
    for (size_t i = 0; i < r_placeholders_.size(); ++i) {
      Node* v = m.placeholder_nodes[i];
      while (replaced_by_.count(v)) v = replaced_by_.at(v);
      env[r_placeholders_[i]] = v;
    }
    {
      Graph::InsertPoint ip(g_, first);
      for (Node* rn : replacement_.graph().nodes()) {
        if (rn->op() == Opcode::kPlaceholder || rn->op() == Opcode::kOutput) continue;
        Node* nn = copy_node(*rn, env);
        for (const auto& kv : rn->meta())
          if (kv.first == "source") nn->meta()[kv.first] = kv.second;
        nn->meta()["rewritten_from"] = c10::IValue(rec.anchor);
        env[rn] = nn;
        rec.replacements.push_back(nn);
      }
    }
    for (size_t i = 0; i < m.returning_nodes.size(); ++i) {
      Node* old_out = m.returning_nodes[i];
      Node* new_out = env.at(r_outputs_[i]);
      old_out->replace_all_uses_with(new_out);
      replaced_by_[old_out] = new_out;
    }
    for (const auto& kv : m.nodes_map)
      if (kv.first->op() != Opcode::kPlaceholder) to_erase_.push_back(kv.second);
    return rec;
  }

  // Erases the replaced nodes left without users (last first), then dead code; lints the graph.
  void finish() {
    std::sort(to_erase_.begin(), to_erase_.end(), [&](Node* a, Node* b) { return pos_.at(a) > pos_.at(b); });
    for (Node* n : to_erase_)
      if (n->users().empty()) g_.erase_node(n);
    g_.eliminate_dead_code();
    g_.lint();
  }

 private:
  // `stem` followed by the first serial number that `taken` rejects.
  std::string unique_path(const std::string& stem, const std::function<bool(const std::string&)>& taken) {
    std::string p;
    do p = stem + std::to_string(serial_++);
    while (taken(p));
    return p;
  }

  // Appends a copy of the replacement node `rn` with its arguments mapped through `env`; copies
  // the constants, modules, methods and functions it uses into `gm_`.
  Node* copy_node(const Node& rn, const std::unordered_map<const Node*, Node*>& env) {
    std::function<Argument(const Argument&)> map_arg = [&](const Argument& a) -> Argument {
      if (a.is_node()) return Argument(env.at(a.node));
      if (a.is_const()) return a;
      Argument b = a;
      for (auto& it : b.items) it = map_arg(it);
      return b;
    };
    std::vector<Argument> args;
    for (const auto& a : rn.args()) args.push_back(map_arg(a));
    std::vector<std::pair<std::string, Argument>> kwargs;
    for (const auto& kv : rn.kwargs()) kwargs.emplace_back(kv.first, map_arg(kv.second));
    switch (rn.op()) {
      case Opcode::kGetAttr: {
        const std::string path = unique_path("_rewrite_const_", [&](const std::string& p) { return gm_.has_attr(p); });
        gm_.add_tensor(path, replacement_.get_attr(rn.target()), /*is_buffer=*/true);
        return g_.get_attr(path, rn.name());
      }
      case Opcode::kCallModule: {
        const std::string path =
            unique_path("_rewrite_module_", [&](const std::string& p) { return gm_.get_submodule(p) != nullptr; });
        gm_.add_submodule(path, replacement_.get_submodule(rn.target()), replacement_.module_fn(rn.target()));
        return g_.call_module(path, std::move(args), std::move(kwargs), rn.name());
      }
      case Opcode::kCallMethod: {
        if (!gm_.method_fn(rn.target())) {
          const CallFn* fn = replacement_.method_fn(rn.target());
          if (!fn) throw ArgumentError("replace_pattern: method '" + rn.target() + "' of the replacement is not bound");
          gm_.add_method(rn.target(), *fn);
        }
        return g_.call_method(rn.target(), std::move(args), std::move(kwargs), rn.name());
      }
      default: {
        if (const CallFn* fn = replacement_.function_fn(rn.target()); fn && !gm_.function_fn(rn.target()))
          gm_.add_function(rn.target(), *fn);
        return g_.call_function(rn.target(), std::move(args), std::move(kwargs), rn.name());
      }
    }
  }

  GraphModule& gm_;
  Graph& g_;
  const GraphModule& replacement_;
  const std::vector<const Node*> r_outputs_;
  const std::vector<Node*> r_placeholders_;
  std::unordered_map<const Node*, size_t> pos_;  // each node's position in the graph before any rewrite
  std::unordered_map<Node*, Node*> replaced_by_;  // matched output -> its replacement (for later matches' inputs)
  std::vector<Node*> to_erase_;
  int serial_ = 0;
};

}  // namespace

std::vector<ReplacedMatch> replace_pattern(GraphModule& gm, const GraphModule& pattern, const GraphModule& replacement,
                                           MatchOptions options) {
  check_signatures(pattern.graph(), replacement.graph());
  const std::vector<Match> matches = SubgraphMatcher(pattern.graph(), options).match(gm.graph());
  if (matches.empty() && options.on_no_match != MatchOptions::OnNoMatch::kIgnore) {
    const std::string msg = no_match_message(pattern.graph(), gm);
    if (options.on_no_match == MatchOptions::OnNoMatch::kError) throw ArgumentError(msg);
    TORCH_WARN(msg);
  }
  PatternReplacer replacer(gm, replacement);
  std::vector<ReplacedMatch> done;
  for (const Match& m : matches) done.push_back(replacer.replace(m));
  replacer.finish();
  return done;
}

std::vector<ReplacedMatch> replace_pattern(GraphModule& gm, const TensorFn& pattern, const TensorFn& replacement,
                                           int num_inputs, MatchOptions options) {
  auto p = trace_function(pattern, num_inputs);
  auto r = trace_function(replacement, num_inputs);
  return replace_pattern(gm, *p, *r, options);
}

}  // namespace qfx::fx
