// The op catalog's shape ops: size(), ints computed from sizes, view / reshape
// with computed shapes, (un)flatten, (un)squeeze, expand, transpose, cat, chunk,
// slice / select, and the pass-through ops (dropout, identity).
#include <algorithm>
#include <limits>

#include <torch/nn/modules/linear.h>

#include "export_shape.h"
#include "op_families.h"

namespace qfx::quant::detail {
namespace {

// The `shape` input of an ONNX Reshape under construction: static sizes as they are,
// and at most one -1 (the size ONNX infers from the element count).
struct ReshapeShape {
  std::vector<int64_t> dims;
  bool minus_one = false;
  // Appends `e`: its size when static, else the one -1. False when a second -1 is needed.
  bool push(const Dim& e) {
    if (!e.batch && e.value >= 0) {
      dims.push_back(e.value);
      return true;
    }
    if (minus_one) return false;
    minus_one = true;
    dims.push_back(-1);
    return true;
  }
};

}  // namespace

const std::vector<Dim>& dims_of(Exporter& ex, const fx::Node& user, const fx::Argument& a) {
  if (!ex.have_dims_) {
    ex.dims_ = detail::batch_shapes(ex.gm_, ex.opt_.input_shapes, ex.opt_.input_dtypes);
    ex.have_dims_ = true;
  }
  if (!a.is_node()) unsupported(user, "a non-tensor argument where a tensor is expected");
  auto it = ex.dims_.find(a.node);
  if (it == ex.dims_.end()) unsupported(user, "the shape of '" + a.node->name() + "' is unknown");
  return it->second;
}

std::vector<int64_t> dims_static(Exporter& ex, const fx::Node& user, const fx::Argument& a) {
  if (a.is_node() && a.node->op() == fx::Opcode::kGetAttr && ex.gm_.has_attr(a.node->target()))
    return ex.gm_.get_attr(a.node->target()).sizes().vec();
  std::vector<int64_t> out;
  for (const Dim& d : dims_of(ex, user, a)) {
    if (d.batch || d.value < 0) unsupported(user, "the shape of '" + (a.is_node() ? a.node->name() : std::string("?")) + "' depends on the batch here");
    out.push_back(d.value);
  }
  return out;
}

bool is_int(Exporter& ex, const fx::Argument& a) { return (a.is_const() && a.value.isInt()) || (a.is_node() && ex.ints_.count(a.node)); }

bool int_operands(Exporter& e, const fx::Node& n) { return n.args().size() >= 2 && is_int(e, n.args()[0]) && is_int(e, n.args()[1]); }

Dim int_of(Exporter& ex, const fx::Node& user, const fx::Argument& a) {
  if (a.is_const() && a.value.isInt()) return {a.value.toInt(), false};
  if (a.is_node()) {
    auto it = ex.ints_.find(a.node);
    if (it != ex.ints_.end()) return it->second;
  }
  unsupported(user, "an int that is neither a constant nor computed from sizes");
}

int64_t norm_dim(const fx::Node& n, int64_t d, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (d < -r || d >= r) unsupported(n, "dim " + std::to_string(d) + " out of range for rank " + std::to_string(r));
  return d < 0 ? d + r : d;
}

void size_op(Exporter& ex, fx::Node* n) {
  const auto& d = dims_of(ex, *n, n->args().at(0));
  if (n->args().size() > 1) ex.ints_[n] = d[static_cast<size_t>(norm_dim(*n, ex.ints_arg(*n, 1).at(0), d.size()))];
  else ex.int_lists_[n] = d;
}

void getitem(Exporter& ex, fx::Node* n) {
  const fx::Argument& src = n->args().at(0);
  if (src.is_node() && ex.int_lists_.count(src.node)) {
    const auto& l = ex.int_lists_[src.node];
    ex.ints_[n] = l[static_cast<size_t>(norm_dim(*n, ex.ints_arg(*n, 1).at(0), l.size()))];
    return;
  }
  if (src.is_node() && ex.tuple_items_.count(src.node)) {
    const auto& items = ex.tuple_items_[src.node];
    ex.names_[n] = items[static_cast<size_t>(norm_dim(*n, ex.ints_arg(*n, 1).at(0), items.size()))];
    ex.rank_[n] = ex.rank_of(src);
    return;
  }
  unsupported(*n, "getitem of a value that is not a size or a chunk");
}

void int_arith(Exporter& ex, fx::Node* n, const std::string& op) {
  const Dim a = int_of(ex, *n, n->args().at(0)), b = int_of(ex, *n, n->args().at(1));
  // A multiple of the batch times a constant, or divided by a divisor of its
  // multiple, stays a multiple of the batch (MultiheadAttention's bsz * num_heads).
  if (op == "mul" && a.batch != b.batch && (a.batch ? b : a).value >= 0) {
    const Dim& k = a.batch ? a : b;
    const Dim& c = a.batch ? b : a;
    ex.ints_[n] = c.value == 0 ? Dim{0, false} : Dim{k.value * c.value, true};
    return;
  }
  if (op == "floordiv" && a.batch && !b.batch && b.value > 0 && a.value % b.value == 0) {
    ex.ints_[n] = {a.value / b.value, true};
    return;
  }
  if (a.batch || b.batch || a.value < 0 || b.value < 0)
    unsupported(*n, "arithmetic on the dynamic batch size other than multiplying it or dividing a multiple of it "
                    "(give model.input_shape a static batch)");
  int64_t v = 0;
  if (op == "add") v = a.value + b.value;
  else if (op == "sub") v = a.value - b.value;
  else if (op == "mul") v = a.value * b.value;
  else {
    if (b.value == 0) unsupported(*n, "integer division by zero");
    v = a.value / b.value;  // both non-negative: floor division
  }
  ex.ints_[n] = {v, false};
}

std::vector<Dim> size_list(Exporter& ex, const fx::Node& n, size_t i) {
  const fx::Argument& sa = n.args().at(i);
  std::vector<Dim> entries;
  if (sa.is_const()) {
    for (auto v : ex.ints_arg(n, i)) entries.push_back({v, false});
  } else if (sa.is_node() && ex.int_lists_.count(sa.node)) {
    entries = ex.int_lists_[sa.node];
  } else {
    for (const auto& it : sa.items) entries.push_back(int_of(ex, n, it));
  }
  return entries;
}

void reshape(Exporter& ex, fx::Node* n) {
  const std::vector<Dim> entries = size_list(ex, *n, 1);
  std::vector<int64_t> shape;
  bool minus_one = false;
  for (const auto& e : entries) minus_one |= !e.batch && e.value == -1;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Dim& e = entries[i];
    if (!e.batch) {
      if (e.value < -1) unsupported(*n, "a shape entry of " + std::to_string(e.value));
      shape.push_back(e.value);
      continue;
    }
    // The batch: 0 copies the input's dim 0 (when that is the same multiple of the
    // batch), else the one -1 (ONNX infers it from the element count).
    auto same_as_input_dim0 = [&] {
      const Dim d0 = dims_of(ex, *n, n->args().at(0)).at(0);
      return d0.batch && d0.value == e.value;
    };
    if (i == 0 && same_as_input_dim0()) {
      shape.push_back(0);
    } else if (!minus_one) {
      shape.push_back(-1);
      minus_one = true;
    } else {
      // Two dims ONNX cannot infer from the element count: the shape computed at run
      // time from the batch (MobileViT's patches: [batch * patch_area, patches, -1]).
      const std::string y = ex.fresh(n->name());
      ex.node("Reshape", {ex.value(*n, n->args().at(0)), sizes_value(ex, *n, entries, n->name() + "_shape", true)}, y, n->name());
      ex.names_[n] = y;
      ex.rank_[n] = static_cast<int>(entries.size());
      return;
    }
  }
  reshape_to(ex, n, shape);
}

void reshape_to(Exporter& ex, fx::Node* n, const std::vector<int64_t>& shape) {
  const std::string y = ex.fresh(n->name());
  ex.node("Reshape", {ex.value(*n, n->args().at(0)), ex.ints_init("shape", shape)}, y, n->name());
  ex.names_[n] = y;
  ex.rank_[n] = static_cast<int>(shape.size());
}

void unflatten(Exporter& ex, fx::Node* n) {
  const std::vector<Dim> in = dims_of(ex, *n, n->args().at(0));
  const int64_t d = norm_dim(*n, ex.ints_arg(*n, 1).at(0), in.size());
  ReshapeShape shape;
  shape.dims.assign(static_cast<size_t>(d), 0);  // 0: ONNX Reshape copies the input's dim
  auto push = [&](const Dim& e) {
    if ((!e.batch && e.value < -1) || !shape.push(e)) unsupported(*n, "an unflatten shape ONNX Reshape cannot express");
  };
  for (const Dim& e : size_list(ex, *n, 2)) push(e);
  for (size_t i = static_cast<size_t>(d) + 1; i < in.size(); ++i) push(in[i]);
  reshape_to(ex, n, shape.dims);
}

void flatten(Exporter& ex, fx::Node* n, int64_t start, int64_t end) {
  const int r = ex.rank_of(n->args().at(0));
  if (r > 0) {
    start = norm_dim(*n, start, static_cast<size_t>(r));
    end = norm_dim(*n, end, static_cast<size_t>(r));
  }
  // ONNX Flatten is always 2-D ([d0 * ... * d(axis-1), rest]): torch's flatten only
  // when it starts at dim 1 and runs to the last; other spans are a Reshape.
  if (start == 1 && (end == -1 || (r > 0 && end == r - 1))) {
    ex.unary(n, "Flatten");
    ex.attr_i(ex.last_, "axis", start);
    ex.rank_[n] = static_cast<int>(start) + 1;
    return;
  }
  if (r < 0 || start < 0 || end < start) unsupported(*n, "flatten of an input of unknown rank before its last dim");
  const std::vector<Dim> in = dims_of(ex, *n, n->args().at(0));
  ReshapeShape shape;
  shape.dims.assign(static_cast<size_t>(start), 0);  // 0: ONNX Reshape copies the input's dim
  Dim merged{1, false};
  for (int64_t i = start; i <= end; ++i) {
    const Dim& e = in[static_cast<size_t>(i)];
    merged.batch |= e.batch || e.value < 0;
    merged.value *= e.value;
  }
  bool ok = shape.push(merged);
  for (size_t i = static_cast<size_t>(end) + 1; i < in.size(); ++i) ok = ok && shape.push(in[i]);
  if (!ok) unsupported(*n, "a flatten ONNX Reshape cannot express (two dynamic dims)");
  reshape_to(ex, n, shape.dims);
}

void unsqueeze(Exporter& ex, fx::Node* n) {
  const int r = ex.rank_of(n->args().at(0));
  int64_t d = ex.ints_arg(*n, 1).at(0);
  if (d < 0 && r < 0) unsupported(*n, "unsqueeze at a negative dim of an input of unknown rank");
  if (r >= 0) d = norm_dim(*n, d, static_cast<size_t>(r) + 1);
  ex.unary(n, "Unsqueeze", 1, {ex.ints_init("axes", {d})});
}

// aten::squeeze.dim / .dims: ONNX Squeeze of every listed dim of size 1 (a listed dim
// of another size stays, as in aten; none of size 1: the identity).
void squeeze(Exporter& ex, fx::Node* n) {
  const std::vector<Dim>& dims = dims_of(ex, *n, n->args().at(0));
  std::vector<int64_t> axes;
  for (int64_t listed : ex.ints_arg(*n, 1)) {
    const int64_t d = norm_dim(*n, listed, dims.size());
    const Dim& e = dims[static_cast<size_t>(d)];
    if (e.batch) unsupported(*n, "squeeze of the dynamic batch dim");
    if (e.value == 1 && std::find(axes.begin(), axes.end(), d) == axes.end()) axes.push_back(d);
  }
  if (axes.empty()) return ex.alias(n);
  std::sort(axes.begin(), axes.end());
  ex.unary(n, "Squeeze", -static_cast<int>(axes.size()), {ex.ints_init("axes", axes)});
}

void expand(Exporter& ex, fx::Node* n) {
  std::vector<Dim> entries = size_list(ex, *n, 1);
  // ONNX Expand broadcasts: -1 (keep the input's dim) is 1 there.
  for (Dim& e : entries)
    if (!e.batch && e.value == -1) e.value = 1;
  const std::string target = sizes_value(ex, *n, entries, "expand_dims");
  const std::string y = ex.fresh(n->name());
  ex.node("Expand", {ex.value(*n, n->args().at(0)), target}, y, n->name());
  ex.names_[n] = y;
  ex.rank_[n] = static_cast<int>(std::max<size_t>(entries.size(), static_cast<size_t>(std::max(ex.rank_of(n->args().at(0)), 0))));
}

std::string sizes_value(Exporter& ex, const fx::Node& node, const std::vector<Dim>& entries, const std::string& hint,
                        bool minus_one) {
  const fx::Node* n = &node;
  // The dynamic batch is read from the first graph input (its dim 0) at run time.
  std::vector<std::string> parts;
  std::vector<int64_t> run;
  auto flush = [&] {
    if (run.empty()) return;
    parts.push_back(ex.ints_init(hint, run));
    run.clear();
  };
  for (const auto& e : entries) {
    if (!e.batch) {
      if (e.value < 0 && !(minus_one && e.value == -1)) unsupported(*n, "a size of " + std::to_string(e.value));
      run.push_back(e.value);
      continue;
    }
    if (e.value < 1 || ex.opt_.input_shapes.empty() || ex.opt_.input_shapes[0].empty() || ex.opt_.input_shapes[0][0] >= 0 || !ex.first_input_)
      unsupported(*n, "a size that is a multiple of the dynamic batch");
    flush();
    // Shape, then its first entry (Shape's start/end attributes are opset 15), times the multiple.
    const std::string shape = ex.fresh(n->name() + "_input_shape");
    ex.node("Shape", {ex.names_.at(ex.first_input_)}, shape, shape);
    std::string batch = ex.fresh(n->name() + "_batch");
    slice_axis(ex, shape, 0, 1, 0, 1, batch, batch);
    if (e.value != 1) {
      const std::string times = ex.fresh(n->name() + "_batch_times");
      ex.node("Mul", {batch, ex.ints_init(n->name() + "_multiple", {e.value})}, times, times);
      batch = times;
    }
    parts.push_back(batch);
  }
  flush();
  if (parts.empty()) return ex.ints_init(hint, {});
  std::string target = parts.size() == 1 ? parts[0] : ex.fresh(n->name() + "_shape");
  if (parts.size() > 1) {
    auto* c = ex.node("Concat", parts, target, target);
    ex.attr_i(c, "axis", 0);
  }
  return target;
}

void slice(Exporter& ex, fx::Node* n) {
  // aten::slice(x, dim, start, end, step) and aten::select(x, dim, index): ONNX Slice
  // (select: a one-element slice, then Squeeze of that axis).
  const bool select = canonical_op_name(*n, ex.gm_) == "select";
  const int r = ex.rank_of(n->args().at(0));
  auto arg = [&](size_t i, int64_t def) {
    if (n->args().size() <= i || (n->args().at(i).is_const() && n->args().at(i).value.isNone())) return def;
    const Dim d = int_of(ex, *n, n->args().at(i));
    if (d.batch) unsupported(*n, "a slice bound that depends on the dynamic batch");
    return d.value;
  };
  int64_t dim = arg(1, 0);
  if (dim < 0) {
    if (r < 0) unsupported(*n, "a negative dim on an input of unknown rank");
    dim += r;
  }
  int64_t start, end, step = 1;
  if (select) {
    start = arg(2, 0);
    end = start == -1 ? std::numeric_limits<int64_t>::max() : start + 1;
  } else {
    start = arg(2, 0);
    end = arg(3, std::numeric_limits<int64_t>::max());
    step = arg(4, 1);
    if (start == 0 && end == std::numeric_limits<int64_t>::max() && step == 1) return ex.alias(n);  // x[:]
  }
  const std::string y = ex.fresh(n->name() + (select ? "_slice" : ""));
  slice_axis(ex, ex.value(*n, n->args().at(0)), start, end, dim, step, y, y);
  ex.names_[n] = y;
  ex.rank_[n] = r;
  if (!select) return;
  const std::string s = ex.fresh(n->name());
  ex.node("Squeeze", {y, ex.ints_init("axes", {dim})}, s, n->name());
  ex.names_[n] = s;
  ex.rank_[n] = r < 0 ? -1 : r - 1;
}

void transpose(Exporter& ex, fx::Node* n) {
  int r = ex.rank_of(n->args().at(0));
  if (r < 0) r = static_cast<int>(dims_of(ex, *n, n->args().at(0)).size());
  std::vector<int64_t> perm(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) perm[static_cast<size_t>(i)] = i;
  const int64_t a = n->args().size() > 1 ? norm_dim(*n, ex.ints_arg(*n, 1).at(0), perm.size()) : 0;
  const int64_t b = n->args().size() > 2 ? norm_dim(*n, ex.ints_arg(*n, 2).at(0), perm.size()) : 1;
  if (r < 2) unsupported(*n, "transpose of a rank " + std::to_string(r) + " value");
  std::swap(perm[static_cast<size_t>(a)], perm[static_cast<size_t>(b)]);
  ex.unary(n, "Transpose");
  ex.attr_ints(ex.last_, "perm", perm);
}

void slice_axis(Exporter& ex, const std::string& x, int64_t start, int64_t end, int64_t axis, int64_t step, const std::string& y,
                          const std::string& name) {
  std::vector<std::string> in = {x, ex.ints_init("starts", {start}), ex.ints_init("ends", {end}), ex.ints_init("axes", {axis})};
  if (step != 1) in.push_back(ex.ints_init("steps", {step}));
  ex.node("Slice", in, y, name);
}

// x's consecutive pieces along `dim` of `size` each (the last may be shorter), or of
// the `sizes` given: ONNX Slice each, the tuple items of n.
void pieces(Exporter& ex, fx::Node* n, int64_t size, std::vector<int64_t> sizes) {
  const auto& d = dims_of(ex, *n, n->args().at(0));
  const int64_t dim = norm_dim(*n, n->args().size() > 2 ? ex.ints_arg(*n, 2).at(0) : 0, d.size());
  const Dim D = d[static_cast<size_t>(dim)];
  if (D.batch || D.value < 0) unsupported(*n, canonical_op_name(*n, ex.gm_) + " along the dynamic batch");
  if (sizes.empty()) {
    if (size <= 0) unsupported(*n, "piece sizes must be positive");
    for (int64_t b = 0; b < D.value || (D.value == 0 && sizes.empty()); b += size) sizes.push_back(std::min(size, D.value - b));
  }
  const std::string& x = ex.value(*n, n->args().at(0));
  std::vector<std::string> items;
  int64_t b = 0;
  for (int64_t s : sizes) {
    if (s < 0 || b + s > D.value) unsupported(*n, "split sizes that do not add up to the dimension");
    const std::string y = ex.fresh(n->name() + "_" + std::to_string(items.size()));
    slice_axis(ex, x, b, b + s, dim, 1, y, n->name() + "_" + std::to_string(items.size()));
    items.push_back(y);
    b += s;
  }
  ex.tuple_items_[n] = items;
  ex.rank_[n] = ex.rank_of(n->args().at(0));
}

// chunk(x, chunks, dim): pieces of ceil(D / chunks).
void chunk(Exporter& ex, fx::Node* n) {
  const auto& d = dims_of(ex, *n, n->args().at(0));
  const int64_t chunks = ex.ints_arg(*n, 1).at(0);
  const int64_t dim = norm_dim(*n, n->args().size() > 2 ? ex.ints_arg(*n, 2).at(0) : 0, d.size());
  const Dim D = d[static_cast<size_t>(dim)];
  if (D.batch || D.value < 0) unsupported(*n, "chunk along the dynamic batch");
  if (chunks <= 0) unsupported(*n, "chunks must be positive");
  pieces(ex, n, std::max<int64_t>((D.value + chunks - 1) / chunks, 1), {});
}

// split(x, split_size, dim) / split_with_sizes(x, sizes, dim).
void split(Exporter& ex, fx::Node* n) {
  const std::vector<int64_t> s = ex.ints_arg(*n, 1);
  const bool sizes = n->target().rfind("aten::split_with_sizes", 0) == 0 || n->target() == "aten::split.sizes";
  if (sizes) return pieces(ex, n, 0, s);
  pieces(ex, n, s.at(0), {});
}

namespace {

void cat(Exporter& e, fx::Node& n) {
  const fx::Argument& list = n.args().at(0);
  std::vector<std::string> ins;
  for (const auto& it : list.items) ins.push_back(e.value(n, it));
  const std::string y = e.fresh(n.name());
  auto* p = e.node("Concat", ins, y, n.name());
  e.attr_i(p, "axis", n.args().size() > 1 ? e.ints_arg(n, 1).at(0) : 0);
  e.names_[&n] = y;
  e.rank_[&n] = list.items.empty() ? -1 : e.rank_of(list.items[0]);
}

// stack(tensors, dim): each input unsqueezed at dim (ONNX Unsqueeze), then one Concat.
void stack(Exporter& e, fx::Node& n) {
  const fx::Argument& list = n.args().at(0);
  if (list.items.empty()) unsupported(n, "stack of no tensors");
  const int r = e.rank_of(list.items[0]);
  if (r < 0) unsupported(n, "stack of values of unknown rank");
  const int64_t dim = norm_dim(n, n.args().size() > 1 ? e.ints_arg(n, 1).at(0) : 0, static_cast<size_t>(r) + 1);
  const std::string axes = e.ints_init(n.name() + "_axes", {dim});
  std::vector<std::string> ins;
  for (size_t i = 0; i < list.items.size(); ++i) {
    ins.push_back(e.fresh(n.name() + "_" + std::to_string(i)));
    e.node("Unsqueeze", {e.value(n, list.items[i]), axes}, ins.back(), ins.back());
  }
  const std::string y = e.fresh(n.name());
  e.attr_i(e.node("Concat", ins, y, n.name()), "axis", dim);
  e.names_[&n] = y;
  e.rank_[&n] = r + 1;
}

// unfold(x, dim, size, step): the windows x[..., i*step : i*step+size, ...] along a
// static dim, stacked at dim with the window's elements as a new last dim: one ONNX
// Slice and Unsqueeze per window, a Concat, and a Transpose to move them last.
void unfold(Exporter& e, fx::Node& n) {
  const std::vector<Dim>& d = dims_of(e, n, n.args().at(0));
  const int64_t dim = norm_dim(n, e.ints_arg(n, 1).at(0), d.size()), size = e.ints_arg(n, 2).at(0), step = e.ints_arg(n, 3).at(0);
  const Dim D = d[static_cast<size_t>(dim)];
  if (D.batch || D.value < 0) unsupported(n, "unfold along a dynamic dim");
  if (size < 1 || step < 1 || size > D.value) unsupported(n, "unfold with a window larger than the dim, or a size or step below 1");
  const int64_t windows = (D.value - size) / step + 1;
  if (windows > 1024) unsupported(n, "unfold into more than 1024 windows");
  const std::string x = e.value(n, n.args().at(0)), axes = e.ints_init(n.name() + "_axes", {dim});
  std::vector<std::string> parts;
  for (int64_t i = 0; i < windows; ++i) {
    const std::string w = e.fresh(n.name() + "_window");
    slice_axis(e, x, i * step, i * step + size, dim, 1, w, w);
    parts.push_back(e.fresh(n.name() + "_row"));
    e.node("Unsqueeze", {w, axes}, parts.back(), parts.back());
  }
  const int r = static_cast<int>(d.size()) + 1;  // the result's rank
  std::string y = e.fresh(n.name() + (dim + 2 == r ? "" : "_stacked"));
  e.attr_i(e.node("Concat", parts, y, y), "axis", dim);
  if (dim + 2 != r) {  // [..., windows, size, rest...] -> [..., windows, rest..., size]
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < r; ++i)
      if (i != dim + 1) perm.push_back(i);
    perm.push_back(dim + 1);
    const std::string t = e.fresh(n.name());
    e.attr_ints(e.node("Transpose", {y}, t, n.name()), "perm", perm);
    y = t;
  }
  e.names_[&n] = y;
  e.rank_[&n] = r;
}

void flatten_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* fl = dynamic_cast<torch::nn::FlattenImpl*>(&m);
  if (!fl) unsupported(n, "module 'flatten' has no ONNX export in qfx yet");
  flatten(e, &n, fl->options.start_dim(), fl->options.end_dim());
}

// A record whose function emission is `f`.
OpRecord op(const std::string& name, void (*f)(Exporter&, fx::Node*), const std::string& what) {
  return OpRecord(name).describe(what).to_onnx([f](Exporter& e, fx::Node& n) { f(e, &n); });
}

void alias(Exporter& e, fx::Node* n) { e.alias(n); }

}  // namespace

void register_shape_ops(OpCatalog& c) {
  c.add(op("size", size_op, "a tensor's sizes (static, or the batch as ONNX Shape)").also_aten({"sym_size"}));
  c.add(op("getitem", getitem, "an element of a list or tuple").also_aten({"__getitem__"}));
  c.add(op("reshape", reshape, "ONNX Reshape").also_aten({"view"}).writes({"Reshape", "Shape", "Slice", "Mul", "Concat"}).quantized_as(activation_kinds()));
  c.add(op("unflatten", unflatten, "ONNX Reshape").writes({"Reshape"}).quantized_as(activation_kinds()));
  c.add(op("unsqueeze", unsqueeze, "ONNX Unsqueeze").writes({"Unsqueeze"}).quantized_as(activation_kinds()));
  c.add(OpRecord("squeeze").quantized_as(activation_kinds()).describe("ONNX Squeeze of the listed dims of size 1").writes({"Squeeze"}).to_onnx([](Exporter& e, fx::Node& n) {
    if (n.args().size() != 2) unsupported(n, "op 'squeeze' without a dim has no ONNX export in qfx yet");
    squeeze(e, &n);
  }));
  c.add(op("expand", expand, "ONNX Expand").also_aten({"broadcast_to"}).writes({"Shape", "Slice", "Concat", "Expand"}));
  c.add(op("transpose", transpose, "ONNX Transpose of two dims").also_aten({"t"}).writes({"Transpose"}).quantized_as(activation_kinds()));
  c.add(op("chunk", chunk, "pieces along one dim (ONNX Slice)").writes({"Slice"}));
  c.add(op("split", split, "pieces of given sizes along one dim (ONNX Slice)").also_aten({"split_with_sizes"}).writes({"Slice"}));
  for (const char* s : {"slice", "select"})
    c.add(op(s, slice, "ONNX Slice (select: then Squeeze)").writes({"Slice", "Squeeze"}).quantized_as(activation_kinds()));
  c.add(OpRecord("unfold").describe("sliding windows along a static dim (ONNX Slice, Unsqueeze, Concat, Transpose)")
            .writes({"Slice", "Unsqueeze", "Concat", "Transpose"}).to_onnx(unfold));
  c.add(OpRecord("stack").describe("ONNX Unsqueeze of each input, then Concat").writes({"Unsqueeze", "Concat"}).to_onnx(stack));
  c.add(OpRecord("cat").also_aten({"concat"}).quantized_as(activation_kinds()).describe("ONNX Concat").writes({"Concat"}).to_onnx(cat));
  c.add(OpRecord("flatten").also_modules({"Flatten"}).quantized_as(activation_kinds()).describe("ONNX Flatten or Reshape").writes({"Flatten", "Reshape"})
            .to_onnx([](Exporter& e, fx::Node& n) {
              flatten(e, &n, n.args().size() > 1 ? e.ints_arg(n, 1).at(0) : 0, n.args().size() > 2 ? e.ints_arg(n, 2).at(0) : -1);
            }, flatten_module));
  c.add(op("dropout", &alias, "the identity in eval mode").also_aten({"feature_dropout"}).also_modules({"Dropout"})
            .quantized_as(activation_kinds()));
  c.add(op("identity", &alias, "the identity").also_aten({"contiguous", "detach", "clone", "alias"}).also_modules({"Identity"})
            .quantized_as(activation_kinds()));
}

}  // namespace qfx::quant::detail
