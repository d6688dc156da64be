// The tracer's containers: lists, tuples and dicts of traced values (element access,
// construction, in-place list ops, dict views) and isinstance, evaluated while
// TorchScript graphs run symbolically (trace_run.cpp runs the nodes).
#include "trace_impl.h"

namespace qfx::fx::detail {

Sym TraceImpl::element(const JNode* n, const Sym& s, int64_t i) {
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
    // An element of a traced list or tuple: its examples' elements; a static one
    // (the channels of x.shape) is a constant.
    std::array<IValue, 2> e;
    bool known = s.shadow != nullptr;
    for (size_t k = 0; k < 2 && known; ++k) {
      const IValue& v = (*s.shadow)[k];
      if (v.isTuple() && i >= 0 && static_cast<size_t>(i) < v.toTupleRef().elements().size()) e[k] = v.toTupleRef().elements()[static_cast<size_t>(i)];
      else if (v.isList() && i >= 0 && static_cast<size_t>(i) < v.toListRef().size()) e[k] = v.toListRef()[static_cast<size_t>(i)];
      else known = false;
    }
    if (known && !e[0].isTensor() && same_example(e[0], e[1])) return Sym::constant(e[0]);
    Node* gi = g_.call_function("getitem", {Argument(s.node), Argument(IValue(i))}, {},
                                s.node->name() + "_" + std::to_string(i));
    annotate(gi, n);
    Sym r = Sym::proxy(gi);
    if (known) r.shadow = std::make_shared<std::array<IValue, 2>>(e);
    return r;
  }
  fail(n, "cannot index this value");
}

// `{k: v, ...}`: a constant dictionary when every value is one (the empty dicts of
// libtorch 2.x's fast-path checks), otherwise a symbolic one (a detection head's
// {"cls_logits": ..., "bbox_regression": ...}); keys must be constants either way.
void TraceImpl::construct_dict(JNode* n, Env& env) {
  auto dt = n->output()->type()->expect<c10::DictType>();
  Sym d = Sym::dict();
  bool all_const = true;
  for (size_t i = 0; i + 1 < n->inputs().size(); i += 2) {
    const Sym& k = in(n, i, env);
    const Sym& v = in(n, i + 1, env);
    if (k.k != Sym::K::kConst) fail(n, "dictionary key depends on tensor values");
    all_const = all_const && v.k == Sym::K::kConst;
    d.keys->push_back(k.c);
    d.items->push_back(v);
  }
  if (!all_const) {
    env[n->output()] = d;
    return;
  }
  c10::impl::GenericDict c(dt->getKeyType(), dt->getValueType());
  for (size_t i = 0; i < d.keys->size(); ++i) c.insert((*d.keys)[i], (*d.items)[i].c);
  env[n->output()] = Sym::constant(IValue(c));
}

// keys(), values() and items() of a symbolic dictionary, in insertion order.
bool TraceImpl::dict_view(JNode* n, const Sym& d, const std::string& op, Env& env) {
  const auto list_type = n->output()->type()->cast<c10::ListType>();
  if (!list_type) return false;
  if (op == "aten::keys") {
    c10::impl::GenericList keys(list_type->getElementType());
    for (const auto& k : *d.keys) keys.push_back(k);
    env[n->output()] = Sym::constant(IValue(keys));
    return true;
  }
  if (op != "aten::values" && op != "aten::items") return false;
  Sym l;
  l.k = Sym::K::kList;
  l.elem = list_type->getElementType();
  l.items = std::make_shared<std::vector<Sym>>();
  for (size_t i = 0; i < d.keys->size(); ++i) {
    if (op == "aten::values") {
      l.items->push_back((*d.items)[i]);
      continue;
    }
    Sym pair;
    pair.k = Sym::K::kTuple;
    pair.items = std::make_shared<std::vector<Sym>>(std::vector<Sym>{Sym::constant((*d.keys)[i]), (*d.items)[i]});
    l.items->push_back(pair);
  }
  env[n->output()] = l;
  return true;
}

bool TraceImpl::structural_dict_op(JNode* n, Env& env) {
  if (n->inputs().empty()) return false;
  const Sym& first = in(n, 0, env);
  const bool const_dict = first.k == Sym::K::kConst && first.c.isGenericDict();
  if (!const_dict && first.k != Sym::K::kDict) return false;
  const std::string op = n->kind().toQualString();
  auto find = [&](const Sym& d, const IValue& key) -> int64_t {
    for (size_t i = 0; i < d.keys->size(); ++i)
      if ((*d.keys)[i] == key) return static_cast<int64_t>(i);
    return -1;
  };
  if (op == "aten::_set_item") {
    const Sym& key = in(n, 1, env);
    const Sym& v = in(n, 2, env);
    if (key.k != Sym::K::kConst) fail(n, "dictionary key depends on tensor values");
    if (const_dict && v.is_const()) return false;  // folds as a constant
    Sym d = first;
    if (const_dict) {  // becomes symbolic: its constant entries first, in order
      d = Sym::dict();
      for (const auto& e : first.c.toGenericDict()) {
        d.keys->push_back(e.key());
        d.items->push_back(Sym::constant(e.value()));
      }
    }
    const int64_t at = find(d, key.c);
    if (at >= 0) {
      (*d.items)[static_cast<size_t>(at)] = v;
    } else {
      d.keys->push_back(key.c);
      d.items->push_back(v);
    }
    env[n->input(0)] = d;  // the mutated dictionary, for every later use of this value
    return true;
  }
  if (first.k != Sym::K::kDict) return false;
  if (op == "aten::__getitem__") {
    const Sym& key = in(n, 1, env);
    if (key.k != Sym::K::kConst) fail(n, "dictionary key depends on tensor values");
    const int64_t at = find(first, key.c);
    if (at < 0) fail(n, "dictionary has no such key");
    env[n->output()] = (*first.items)[static_cast<size_t>(at)];
    return true;
  }
  if (op == "aten::len") {
    env[n->output()] = Sym::constant(IValue(static_cast<int64_t>(first.keys->size())));
    return true;
  }
  if (op == "aten::__contains__") {
    const Sym& key = in(n, 1, env);
    if (key.k != Sym::K::kConst) fail(n, "dictionary key depends on tensor values");
    env[n->output()] = Sym::constant(IValue(find(first, key.c) >= 0));
    return true;
  }
  if (dict_view(n, first, op, env)) return true;
  fail(n, "operation " + op + " on a dictionary of traced values");
}

// insert, pop, clear and reverse of a list holding traced values, with Python's
// semantics (insert clamps its index; pop takes the last item by default); the index
// must be a constant.
bool TraceImpl::in_place_list_op(JNode* n, const std::string& op, std::vector<Sym>& items, Env& env) {
  const auto size = static_cast<int64_t>(items.size());
  auto index = [&](size_t input, int64_t fallback) {
    if (n->inputs().size() <= input) return fallback;
    const Sym& idx = in(n, input, env);
    if (idx.k != Sym::K::kConst) fail(n, "list index depends on tensor values");
    return idx.c.toInt();
  };
  if (op == "aten::insert") {
    int64_t i = index(1, 0);
    if (i < 0) i += size;
    i = std::min(std::max<int64_t>(i, 0), size);
    items.insert(items.begin() + i, in(n, 2, env));
    return true;
  }
  if (op == "aten::pop") {
    int64_t i = index(1, -1);
    if (i < 0) i += size;
    if (i < 0 || i >= size) fail(n, "pop index out of range");
    env[n->output()] = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return true;
  }
  if (op == "aten::clear") {
    items.clear();
    return true;
  }
  if (op == "aten::reverse") {
    std::reverse(items.begin(), items.end());
    return true;
  }
  fail(n, "in-place list operation " + op + " on a list of traced values");
}

bool TraceImpl::structural_list_op(JNode* n, Env& env) {
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
  if (op == "aten::list" || op == "aten::copy") {  // list(xs), xs.copy(): a new list of the same items
    Sym copy = first;
    copy.k = Sym::K::kList;
    copy.items = std::make_shared<std::vector<Sym>>(items);
    if (!copy.elem) copy.elem = n->output()->type()->expect<c10::ListType>()->getElementType();
    env[n->output()] = copy;
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
    // A list of constants folds, unless a traced value goes into it (an empty list is
    // one of constants).
    if (first.is_const() && (op != "aten::insert" || in(n, 2, env).is_const())) return false;
    return in_place_list_op(n, op, items, env);
  }
  return false;
}

void TraceImpl::run_isinstance(JNode* n, Env& env) {
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

}  // namespace qfx::fx::detail
