#include "qfx/fx/graph.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include "qfx/error.h"

namespace qfx::fx {

const char* opcode_name(Opcode op) {
  switch (op) {
    case Opcode::kPlaceholder: return "placeholder";
    case Opcode::kGetAttr: return "get_attr";
    case Opcode::kCallFunction: return "call_function";
    case Opcode::kCallModule: return "call_module";
    case Opcode::kCallMethod: return "call_method";
    case Opcode::kOutput: return "output";
  }
  return "?";
}

Argument Argument::list(std::vector<Argument> items, c10::TypePtr elem) {
  Argument a;
  a.kind = Kind::kList;
  a.items = std::move(items);
  a.elem_type = std::move(elem);
  return a;
}

Argument Argument::tuple(std::vector<Argument> items) {
  Argument a;
  a.kind = Kind::kTuple;
  a.items = std::move(items);
  return a;
}

// ---- Node ---------------------------------------------------------------------

Node::Node(Graph* g, Opcode op, std::string name, std::string target)
    : graph_(g), op_(op), name_(std::move(name)), target_(std::move(target)) {}

std::vector<Node*> Node::input_nodes() const {
  std::vector<Node*> out;
  auto add = [&](Node* n) { if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n); };
  for (const auto& a : args_) for_each_node(a, add);
  for (const auto& kv : kwargs_) for_each_node(kv.second, add);
  return out;
}

void Node::add_uses() {
  for (Node* in : input_nodes()) {
    if (std::find(in->users_.begin(), in->users_.end(), this) == in->users_.end()) in->users_.push_back(this);
  }
}

void Node::remove_uses() {
  for (Node* in : input_nodes()) {
    in->users_.erase(std::remove(in->users_.begin(), in->users_.end(), this), in->users_.end());
  }
}

void Node::set_args(std::vector<Argument> args) {
  remove_uses();
  args_ = std::move(args);
  add_uses();
}

void Node::set_kwargs(std::vector<std::pair<std::string, Argument>> kwargs) {
  remove_uses();
  kwargs_ = std::move(kwargs);
  add_uses();
}

namespace {
void replace_in(Argument& a, Node* from, Node* to) {
  if (a.kind == Argument::Kind::kNode && a.node == from) a.node = to;
  for (auto& it : a.items) replace_in(it, from, to);
}
}  // namespace

void Node::replace_input_with(Node* old_input, Node* new_input) {
  remove_uses();
  for (auto& a : args_) replace_in(a, old_input, new_input);
  for (auto& kv : kwargs_) replace_in(kv.second, old_input, new_input);
  add_uses();
}

std::vector<Node*> Node::replace_all_uses_with(Node* replacement) {
  if (replacement == this) throw ArgumentError("replace_all_uses_with: node " + name_ + " cannot replace itself");
  std::vector<Node*> changed = users_;
  for (Node* u : changed) u->replace_input_with(this, replacement);
  return changed;
}

Node* Node::next() const {
  auto it = std::next(self_);
  return it == graph_->nodes_.end() ? nullptr : it->get();
}

Node* Node::prev() const {
  return self_ == graph_->nodes_.begin() ? nullptr : std::prev(self_)->get();
}

// ---- Graph --------------------------------------------------------------------

std::string Graph::unique_name(const std::string& hint) {
  std::string base;
  for (char c : hint) base.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (base.empty()) base = "_";
  if (std::isdigit(static_cast<unsigned char>(base[0]))) base = "_" + base;
  std::string candidate = base;
  int& count = name_counts_[base];
  while (by_name_.count(candidate)) candidate = base + "_" + std::to_string(++count);
  return candidate;
}

Node* Graph::create(Opcode op, const std::string& target, std::vector<Argument> args,
                    std::vector<std::pair<std::string, Argument>> kwargs, const std::string& name_hint) {
  if (op != Opcode::kOutput && output_node() && insert_before_ == nullptr) {
    // Keep the output last: appending after it would break topological order.
    insert_before_ = output_node();
    auto guard_reset = [this]() { insert_before_ = nullptr; };
    Node* n = create(op, target, std::move(args), std::move(kwargs), name_hint);
    guard_reset();
    return n;
  }
  std::string name = unique_name(name_hint.empty() ? target : name_hint);
  auto node = std::unique_ptr<Node>(new Node(this, op, name, target));
  Node* raw = node.get();
  auto pos = insert_before_ ? insert_before_->self_ : nodes_.end();
  raw->self_ = nodes_.insert(pos, std::move(node));
  by_name_[name] = raw;
  raw->args_ = std::move(args);
  raw->kwargs_ = std::move(kwargs);
  raw->add_uses();
  return raw;
}

Node* Graph::placeholder(const std::string& name, const std::string& type) {
  Node* n = create(Opcode::kPlaceholder, name, {}, {}, name);
  n->target_ = n->name_;
  n->meta()["type"] = type;
  return n;
}

Node* Graph::get_attr(const std::string& target, const std::string& name_hint) {
  return create(Opcode::kGetAttr, target, {}, {}, name_hint);
}

namespace {
// "aten::add.Tensor" -> "add"; "__torch__.topk_decode" -> "topk_decode".
std::string short_name(const std::string& target) {
  std::string s = target;
  auto p = s.rfind("::");
  if (p != std::string::npos) {
    s = s.substr(p + 2);
    auto dot = s.find('.');
    if (dot != std::string::npos) s = s.substr(0, dot);
  } else {
    auto dot = s.rfind('.');
    if (dot != std::string::npos) s = s.substr(dot + 1);
  }
  return s;
}
}  // namespace

Node* Graph::call_function(const std::string& target, std::vector<Argument> args,
                           std::vector<std::pair<std::string, Argument>> kwargs, const std::string& name_hint) {
  return create(Opcode::kCallFunction, target, std::move(args), std::move(kwargs),
                name_hint.empty() ? short_name(target) : name_hint);
}

Node* Graph::call_module(const std::string& target, std::vector<Argument> args,
                         std::vector<std::pair<std::string, Argument>> kwargs, const std::string& name_hint) {
  return create(Opcode::kCallModule, target, std::move(args), std::move(kwargs), name_hint);
}

Node* Graph::call_method(const std::string& target, std::vector<Argument> args,
                         std::vector<std::pair<std::string, Argument>> kwargs, const std::string& name_hint) {
  return create(Opcode::kCallMethod, target, std::move(args), std::move(kwargs),
                name_hint.empty() ? short_name(target) : name_hint);
}

Node* Graph::output(Argument result) {
  if (output_node()) throw ArgumentError("graph already has an output node");
  Node* saved = insert_before_;
  insert_before_ = nullptr;
  Node* n = create(Opcode::kOutput, "output", {std::move(result)}, {}, "output");
  insert_before_ = saved;
  return n;
}

void Graph::erase_node(Node* n) {
  if (n->graph_ != this) throw ArgumentError("erase_node: node " + n->name() + " is not in this graph");
  if (!n->users_.empty()) {
    throw ArgumentError("erase_node: node " + n->name() + " still has " + std::to_string(n->users_.size()) +
                           " user(s), first " + n->users_.front()->name());
  }
  if (insert_before_ == n) insert_before_ = n->next();
  n->remove_uses();
  by_name_.erase(n->name_);
  nodes_.erase(n->self_);
}

int Graph::eliminate_dead_code() {
  int removed = 0;
  const auto order = nodes();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    // In-place aten ops end in one underscore (add_, relu_); dunder names
    // (__getitem__, __and__) are pure.
    const std::string op = n->op() == Opcode::kCallFunction ? short_name(n->target()) : std::string();
    const bool in_place = op.size() > 1 && op.back() == '_' && op[op.size() - 2] != '_';
    bool side_effect = n->op() == Opcode::kPlaceholder || n->op() == Opcode::kOutput || in_place ||
                       n->op() == Opcode::kCallMethod;
    if (n->users().empty() && !side_effect) {
      erase_node(n);
      ++removed;
    }
  }
  return removed;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

Node* Graph::find_node(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

namespace {
Argument remap(const Argument& a, const std::unordered_map<const Node*, Node*>& to) {
  Argument r = a;
  if (a.kind == Argument::Kind::kNode) r.node = to.at(a.node);
  for (auto& it : r.items) it = remap(it, to);
  return r;
}
}  // namespace

std::unique_ptr<Graph> Graph::copy() const {
  auto g = std::make_unique<Graph>();
  std::unordered_map<const Node*, Node*> to;
  for (const auto& up : nodes_) {
    const Node* n = up.get();
    std::vector<Argument> args;
    for (const auto& a : n->args_) args.push_back(remap(a, to));
    std::vector<std::pair<std::string, Argument>> kwargs;
    for (const auto& kv : n->kwargs_) kwargs.emplace_back(kv.first, remap(kv.second, to));
    Node* c = g->create(n->op_, n->target_, std::move(args), std::move(kwargs), n->name_);
    c->meta_ = n->meta_;
    to[n] = c;
  }
  return g;
}

Node* Graph::output_node() const {
  if (nodes_.empty()) return nullptr;
  Node* last = nodes_.back().get();
  return last->op() == Opcode::kOutput ? last : nullptr;
}

std::vector<Node*> Graph::placeholders() const {
  std::vector<Node*> out;
  for (const auto& n : nodes_) if (n->op() == Opcode::kPlaceholder) out.push_back(n.get());
  return out;
}

void Graph::lint() const {
  std::unordered_set<const Node*> seen;
  std::unordered_set<std::string> names;
  int outputs = 0;
  for (const auto& up : nodes_) {
    const Node* n = up.get();
    if (n->graph_ != this) throw InternalError("lint: node " + n->name() + " belongs to another graph");
    if (!names.insert(n->name()).second) throw InternalError("lint: duplicate node name " + n->name());
    for (Node* in : n->input_nodes()) {
      if (!seen.count(in)) {
        throw InternalError("lint: node " + n->name() + " uses " + in->name() +
                               (in->graph_ == this ? ", which is defined after it" : ", which is not in this graph"));
      }
      if (std::find(in->users_.begin(), in->users_.end(), n) == in->users_.end())
        throw InternalError("lint: " + in->name() + ".users is missing " + n->name());
    }
    for (const Node* u : n->users_) {
      auto ins = u->input_nodes();
      if (std::find(ins.begin(), ins.end(), n) == ins.end())
        throw InternalError("lint: " + n->name() + ".users lists " + u->name() + ", which does not use it");
    }
    if (n->op() == Opcode::kOutput) {
      ++outputs;
      if (n != nodes_.back().get()) throw InternalError("lint: output node " + n->name() + " is not last");
    }
    seen.insert(n);
  }
  if (outputs != 1) throw InternalError("lint: graph has " + std::to_string(outputs) + " output nodes, expected 1");
}

namespace {

std::string format_ivalue(const c10::IValue& v) {
  if (v.isNone()) return "None";
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isString()) return "'" + v.toStringRef() + "'";
  if (v.isTensor()) {
    std::ostringstream os;
    os << "tensor(" << v.toTensor().sizes() << ")";
    return os.str();
  }
  if (v.isList() || v.isTuple()) {
    const bool tuple = v.isTuple();
    std::vector<c10::IValue> elems;
    if (tuple) {
      for (const auto& e : v.toTupleRef().elements()) elems.push_back(e);
    } else {
      for (const auto& e : v.toListRef()) elems.push_back(e);
    }
    std::string s = tuple ? "(" : "[";
    for (size_t i = 0; i < elems.size(); ++i) s += (i ? ", " : "") + format_ivalue(elems[i]);
    if (tuple && elems.size() == 1) s += ",";
    return s + (tuple ? ")" : "]");
  }
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

std::string format_argument(const Argument& a) {
  switch (a.kind) {
    case Argument::Kind::kNode: return a.node->name();
    case Argument::Kind::kConst: return format_ivalue(a.value);
    case Argument::Kind::kList:
    case Argument::Kind::kTuple: {
      const bool tuple = a.kind == Argument::Kind::kTuple;
      std::string s = tuple ? "(" : "[";
      for (size_t i = 0; i < a.items.size(); ++i) s += (i ? ", " : "") + format_argument(a.items[i]);
      if (tuple && a.items.size() == 1) s += ",";
      return s + (tuple ? ")" : "]");
    }
  }
  return "?";
}

namespace {
std::string format_args(const std::vector<Argument>& args) {
  std::string s = "(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + format_argument(args[i]);
  if (args.size() == 1) s += ",";
  return s + ")";
}
std::string format_kwargs(const std::vector<std::pair<std::string, Argument>>& kw) {
  std::string s = "{";
  for (size_t i = 0; i < kw.size(); ++i) s += (i ? ", " : "") + ("'" + kw[i].first + "': ") + format_argument(kw[i].second);
  return s + "}";
}
}  // namespace

void Graph::print_tabular(std::ostream& os, const std::function<std::string(const Node&)>& module_type) const {
  // Shape and dtype columns appear once ShapeProp (or a tracer) recorded them.
  bool with_shapes = false;
  for (const auto& n : nodes_) with_shapes |= n->meta().count("shape") || n->meta().count("shapes");
  bool with_modules = false;
  if (module_type)
    for (const auto& n : nodes_) with_modules |= n->op() == Opcode::kCallModule;
  const size_t cols = (with_shapes ? 7 : 5) + (with_modules ? 1 : 0);
  auto shape_of = [](const Node& n) -> std::string {
    auto it = n.meta().find("shape");
    if (it == n.meta().end()) it = n.meta().find("shapes");
    return it == n.meta().end() ? "" : format_ivalue(it->second);
  };
  auto dtype_of = [](const Node& n) -> std::string {
    auto it = n.meta().find("dtype");
    return it != n.meta().end() && it->second.isString() ? it->second.toStringRef() : "";
  };
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"opcode", "name", "target", "args", "kwargs"});
  if (with_modules) rows[0].insert(rows[0].begin() + 3, "module");
  if (with_shapes) rows[0].insert(rows[0].end(), {"shape", "dtype"});
  for (const auto& n : nodes_) {
    rows.push_back({opcode_name(n->op()), n->name(), n->target(), format_args(n->args()), format_kwargs(n->kwargs())});
    if (with_modules) rows.back().insert(rows.back().begin() + 3, n->op() == Opcode::kCallModule ? module_type(*n) : "");
    if (with_shapes) rows.back().insert(rows.back().end(), {shape_of(*n), dtype_of(*n)});
  }
  std::vector<size_t> w(cols, 0);
  for (const auto& r : rows) for (size_t i = 0; i < cols; ++i) w[i] = std::max(w[i], r[i].size());
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < cols; ++i) {
      os << std::left << std::setw(static_cast<int>(i + 1 < cols ? w[i] : 0)) << r[i];
      if (i + 1 < cols) os << "  ";
    }
    os << "\n";
  };
  line(rows[0]);
  std::vector<std::string> sep;
  for (size_t i = 0; i < cols; ++i) sep.push_back(std::string(w[i], '-'));
  line(sep);
  for (size_t r = 1; r < rows.size(); ++r) line(rows[r]);
}

namespace {
// `self.a.b` for dotted path "a.b", with getattr for components that are not Python
// identifiers ("classifier.1" -> getattr(self.classifier, "1")), as torch.fx writes them.
std::string python_attr(const std::string& dotted) {
  std::string expr = "self";
  size_t start = 0;
  while (start <= dotted.size()) {
    const size_t dot = dotted.find('.', start);
    const std::string c = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool ident = !c.empty() && !std::isdigit(static_cast<unsigned char>(c[0]));
    for (char ch : c) ident = ident && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
    expr = ident ? expr + "." + c : "getattr(" + expr + ", \"" + c + "\")";
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return expr;
}
}  // namespace

std::string Graph::python_code(const std::string& fn_name) const {
  std::ostringstream os;
  os << "def " << fn_name << "(self";
  for (Node* p : placeholders()) os << ", " << p->name();
  os << "):\n";
  auto call_args = [](const Node* n) {
    std::string s;
    for (size_t i = 0; i < n->args().size(); ++i) s += (i ? ", " : "") + format_argument(n->args()[i]);
    for (const auto& kv : n->kwargs()) s += (s.empty() ? "" : ", ") + kv.first + " = " + format_argument(kv.second);
    return s;
  };
  for (const auto& up : nodes_) {
    const Node* n = up.get();
    switch (n->op()) {
      case Opcode::kPlaceholder: break;
      case Opcode::kGetAttr: os << "    " << n->name() << " = " << python_attr(n->target()) << "\n"; break;
      case Opcode::kCallModule: os << "    " << n->name() << " = " << python_attr(n->target()) << "(" << call_args(n) << ")\n"; break;
      case Opcode::kCallMethod: os << "    " << n->name() << " = self." << n->target() << "(" << call_args(n) << ")\n"; break;
      case Opcode::kCallFunction: {
        std::string t = n->target();
        auto p = t.find("::");
        if (p != std::string::npos) t = "torch.ops." + t.substr(0, p) + "." + t.substr(p + 2);
        os << "    " << n->name() << " = " << t << "(" << call_args(n) << ")\n";
        break;
      }
      case Opcode::kOutput: os << "    return " << format_argument(n->args().at(0)) << "\n"; break;
    }
  }
  return os.str();
}

Graph::InsertPoint::InsertPoint(Graph& g, Node* before) : g_(g), saved_(g.insert_before_) { g.insert_before_ = before; }
Graph::InsertPoint::~InsertPoint() { g_.insert_before_ = saved_; }

std::vector<std::string> output_keys(const Graph& g) {
  const Node* out = g.output_node();
  if (!out) return {};
  auto it = out->meta().find("output_keys");
  if (it == out->meta().end() || !it->second.isList()) return {};
  std::vector<std::string> keys;
  for (const auto& k : it->second.toListRef()) keys.push_back(k.toStringRef());
  return keys;
}

void set_output_keys(Node* output, const std::vector<c10::IValue>& keys) {
  c10::List<std::string> k;
  for (const auto& key : keys) k.push_back(key.isString() ? key.toStringRef() : key.isInt() ? std::to_string(key.toInt()) : key.tagKind());
  output->meta()["output_keys"] = k;
}

}  // namespace qfx::fx
