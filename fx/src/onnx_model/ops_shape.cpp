// ONNX shape and indexing ops: Shape, Gather, Slice, Concat, (Un)Squeeze,
// Reshape, Flatten, Transpose, Expand, Split, ConstantOfShape, Range, Tile.
// On shape values (an int64 vector read from Shape) they compute elements:
// constants fold, dynamic dims stay aten::size nodes.
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>

#include <cmath>

#include "builder.h"
#include "proto.h"

namespace qfx::fx::onnx_detail {
namespace {

std::vector<int64_t> const_ints(Builder& b, size_t i, const std::string& what) {
  const at::Tensor c = b.constant(i, what).to(at::kLong).contiguous().reshape({-1});
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Axes from input `i` (opset >= 13) or the "axes" attribute.
std::vector<int64_t> axes_of(Builder& b, size_t i) {
  if (b.has_input(i)) return const_ints(b, i, "axes");
  return attr_ints(b.node(), "axes");
}

int64_t norm_axis(int64_t a, int64_t rank) { return a < 0 ? a + rank : a; }

bool is_shape(const Value& v) { return !v.sym.empty(); }


void shape(Builder& b) {
  const int64_t r = b.rank(0);
  int64_t start = norm_axis(attr_i(b.node(), "start", 0), r), end = attr_i(b.node(), "end", r);
  end = std::clamp<int64_t>(norm_axis(end, r), 0, r);
  start = std::clamp<int64_t>(start, 0, r);
  std::vector<Argument> e;
  for (int64_t d = start; d < end; ++d) e.push_back(b.dim(0, d));
  b.bind(0, shape_value(std::move(e), false));
}

void gather(Builder& b) {
  const int64_t axis = attr_i(b.node(), "axis", 0);
  const bool const_idx = b.in(1).constant.defined();
  if (is_shape(b.in(0)) && const_idx) {
    const std::vector<Argument> e = *shape_elements(b.in(0));
    const at::Tensor idx = b.in(1).constant;
    std::vector<Argument> out;
    for (int64_t i : const_ints(b, 1, "indices")) out.push_back(e.at(static_cast<size_t>(norm_axis(i, static_cast<int64_t>(e.size())))));
    b.bind(0, shape_value(std::move(out), idx.dim() == 0));
    return;
  }
  const int64_t a = norm_axis(axis, b.rank(0));
  if (const_idx && b.in(1).constant.dim() == 0) {
    b.bind(0, b.call("aten::select.int", {Argument(b.tensor(0)), Argument(c10::IValue(a)), Argument(c10::IValue(b.in(1).constant.item<int64_t>()))}));
  } else if (a == 0 && b.rank(0) == 2) {  // an embedding lookup
    b.bind(0, b.call("aten::embedding", {Argument(b.tensor(0)), Argument(b.tensor(1)), Argument(c10::IValue(int64_t{-1})),
                                         Argument(c10::IValue(false)), Argument(c10::IValue(false))}));
  } else if (b.rank(1) == 1) {
    b.bind(0, b.call("aten::index_select", {Argument(b.tensor(0)), Argument(c10::IValue(a)), Argument(b.tensor(1))}));
  } else {
    b.fail("Gather with " + std::to_string(b.rank(1)) + "-D indices on axis " + std::to_string(a) + " of a " + std::to_string(b.rank(0)) + "-D tensor");
  }
}

void slice(Builder& b) {
  if (b.opset() < 10) b.fail("Slice with attribute bounds (opset < 10)");
  const std::vector<int64_t> starts = const_ints(b, 1, "starts"), ends = const_ints(b, 2, "ends");
  std::vector<int64_t> axes = b.has_input(3) ? const_ints(b, 3, "axes") : std::vector<int64_t>();
  const std::vector<int64_t> steps = b.has_input(4) ? const_ints(b, 4, "steps") : std::vector<int64_t>(starts.size(), 1);
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    b.invalid("starts, ends, axes and steps differ in length");
  if (is_shape(b.in(0))) {
    const std::vector<Argument> e = *shape_elements(b.in(0));
    const auto n = static_cast<int64_t>(e.size());
    if (steps[0] != 1) b.fail("a strided slice of a shape");
    const int64_t s = std::clamp<int64_t>(starts[0] < 0 ? starts[0] + n : starts[0], 0, n);
    const int64_t t = std::clamp<int64_t>(ends[0] < 0 ? ends[0] + n : ends[0], 0, n);
    b.bind(0, shape_value(std::vector<Argument>(e.begin() + s, e.begin() + std::max(s, t)), false));
    return;
  }
  Value v = b.in(0);
  const int64_t r = b.rank(0);
  for (size_t i = 0; i < starts.size(); ++i) {
    if (steps[i] <= 0) b.fail("a slice with step " + std::to_string(steps[i]) + " (qfx reads positive steps)");
    v = b.call("aten::slice.Tensor", {Argument(b.node_of(v)), Argument(c10::IValue(norm_axis(axes[i], r))), Argument(c10::IValue(starts[i])),
                                      Argument(c10::IValue(ends[i])), Argument(c10::IValue(steps[i]))});
  }
  b.bind(0, v);
}

void concat(Builder& b) {
  bool any_shape = false;
  for (size_t i = 0; i < static_cast<size_t>(b.node().input_size()); ++i) any_shape = any_shape || is_shape(b.in(i));
  if (any_shape) {
    std::vector<Argument> e;
    for (size_t i = 0; i < static_cast<size_t>(b.node().input_size()); ++i) {
      auto part = shape_elements(b.in(i));
      if (!part) b.fail("concatenates a shape with a tensor computed at run time");
      e.insert(e.end(), part->begin(), part->end());
    }
    b.bind(0, shape_value(std::move(e), false));
    return;
  }
  std::vector<Argument> xs;
  for (size_t i = 0; i < static_cast<size_t>(b.node().input_size()); ++i) xs.emplace_back(b.tensor(i));
  b.bind(0, b.call("aten::cat", {Argument::list(std::move(xs), c10::TensorType::get()), Argument(c10::IValue(attr_i(b.node(), "axis", 0)))}));
}

void unsqueeze(Builder& b) {
  std::vector<int64_t> axes = axes_of(b, 1);
  if (is_shape(b.in(0))) {
    if (!b.in(0).sym_scalar || axes.size() != 1 || (axes[0] != 0 && axes[0] != -1)) b.fail("unsqueezes a shape vector");
    b.bind(0, shape_value(b.in(0).sym, false));
    return;
  }
  const int64_t out_rank = b.rank(0) + static_cast<int64_t>(axes.size());
  for (auto& a : axes) a = norm_axis(a, out_rank);
  std::sort(axes.begin(), axes.end());
  Value v = b.in(0);
  for (int64_t a : axes) v = b.call("aten::unsqueeze", {Argument(b.node_of(v)), Argument(c10::IValue(a))});
  b.bind(0, v);
}

void squeeze(Builder& b) {
  std::vector<int64_t> axes = axes_of(b, 1);
  if (is_shape(b.in(0))) {
    if (b.in(0).sym.size() != 1) b.fail("squeezes a shape vector of " + std::to_string(b.in(0).sym.size()) + " elements");
    b.bind(0, shape_value(b.in(0).sym, true));
    return;
  }
  const int64_t r = b.rank(0);
  Value v = b.in(0);
  if (axes.empty()) {
    v = b.call("aten::squeeze", {Argument(b.tensor(0))});
  } else {
    for (auto& a : axes) a = norm_axis(a, r);
    std::sort(axes.rbegin(), axes.rend());
    for (int64_t a : axes) v = b.call("aten::squeeze.dim", {Argument(b.node_of(v)), Argument(c10::IValue(a))});
  }
  b.bind(0, v);
}

void reshape(Builder& b) {
  if (is_shape(b.in(0))) {  // a shape vector reshaped to 1-D stays itself
    if (b.shape(1) != std::vector<int64_t>{1}) b.fail("reshapes a shape vector to more than one dim");
    b.forward_input(0, 0);
    return;
  }
  auto e = shape_elements(b.in(1));
  if (!e) b.fail("the target shape is a tensor computed at run time");
  if (!attr_i(b.node(), "allowzero", 0))
    for (size_t d = 0; d < e->size(); ++d)
      if ((*e)[d].kind == Argument::Kind::kConst && (*e)[d].value.toInt() == 0) (*e)[d] = b.dim(0, static_cast<int64_t>(d));
  b.bind(0, b.call("aten::reshape", {Argument(b.tensor(0)), int_list(*e)}));
}

void flatten(Builder& b) {
  const int64_t r = b.rank(0);
  const int64_t axis = norm_axis(attr_i(b.node(), "axis", 1), r);
  Node* x = b.tensor(0);
  if (axis == 0) {
    b.bind(0, b.call("aten::reshape", {Argument(x), Argument(c10::IValue(std::vector<int64_t>{1, -1}))}));
    return;
  }
  Value v = b.call("aten::flatten.using_ints", {Argument(x), Argument(c10::IValue(axis)), Argument(c10::IValue(int64_t{-1}))});
  if (axis > 1) v = b.call("aten::flatten.using_ints", {Argument(b.node_of(v)), Argument(c10::IValue(int64_t{0})), Argument(c10::IValue(axis - 1))});
  b.bind(0, v);
}

void transpose(Builder& b) {
  const int64_t r = b.rank(0);
  std::vector<int64_t> perm = attr_ints(b.node(), "perm");
  if (perm.empty())
    for (int64_t d = r - 1; d >= 0; --d) perm.push_back(d);
  b.bind(0, b.call("aten::permute", {Argument(b.tensor(0)), Argument(c10::IValue(perm))}));
}

// ONNX Expand broadcasts both ways: a 1 in the target keeps the input's dim (-1).
void expand(Builder& b) {
  auto e = shape_elements(b.in(1));
  if (!e) b.fail("the target shape is a tensor computed at run time");
  const std::vector<int64_t> in = b.shape(0);
  const auto n = static_cast<int64_t>(std::max(e->size(), in.size()));
  std::vector<Argument> out;
  for (int64_t d = 0; d < n; ++d) {
    const int64_t ei = d - (n - static_cast<int64_t>(e->size())), ii = d - (n - static_cast<int64_t>(in.size()));
    const bool one = ei < 0 || ((*e)[ei].kind == Argument::Kind::kConst && (*e)[ei].value.toInt() == 1);
    out.push_back(one ? Argument(c10::IValue(int64_t{ii >= 0 ? -1 : 1})) : (*e)[ei]);
  }
  std::vector<int64_t> sizes;  // the output's static sizes (1 for a dynamic one), bounded
  for (int64_t d = 0; d < n; ++d) {
    const int64_t ii = d - (n - static_cast<int64_t>(in.size()));
    const Argument& a = out[static_cast<size_t>(d)];
    const int64_t v = a.kind == Argument::Kind::kConst ? a.value.toInt() : 1;
    sizes.push_back(v == -1 ? std::max<int64_t>(in[static_cast<size_t>(ii)], 1) : std::max<int64_t>(v, 0));
  }
  b.check_size(sizes, "the output");
  b.bind(0, b.call("aten::expand", {Argument(b.tensor(0)), int_list(out), Argument(c10::IValue(false))}));
}

void split(Builder& b) {
  const int64_t r = b.rank(0);
  const int64_t axis = b.axis(attr_i(b.node(), "axis", 0), r, "axis");
  const int64_t size = b.shape(0)[axis];
  std::vector<int64_t> sizes;
  if (b.opset() >= 13 && b.has_input(1)) sizes = const_ints(b, 1, "split");
  else if (b.opset() < 13) sizes = attr_ints(b.node(), "split");
  if (sizes.empty()) {
    const int64_t parts = attr_i(b.node(), "num_outputs", b.node().output_size());
    if (size < 0) b.fail("an even split of a dynamic dim");
    if (parts < 1) b.invalid("num_outputs " + std::to_string(parts));
    const int64_t chunk = (size + parts - 1) / parts;
    for (int64_t k = 0, left = size; k < parts; ++k, left -= chunk) sizes.push_back(std::min(chunk, left));
  }
  int64_t start = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    b.bind(k, b.call("aten::slice.Tensor", {Argument(b.tensor(0)), Argument(c10::IValue(axis)), Argument(c10::IValue(start)),
                                            Argument(c10::IValue(start + sizes[k])), Argument(c10::IValue(int64_t{1}))}));
    start += sizes[k];
  }
}

void constant_of_shape(Builder& b) {
  const std::vector<int64_t> shape = const_ints(b, 0, "the shape (a dynamic one: fix the input shape)");
  b.check_size(shape, "the output");
  at::Tensor value = b.attr_tensor("value");
  if (!value.defined()) value = at::zeros({1}, at::kFloat);
  if (value.numel() != 1) b.invalid("value must hold one element");
  b.bind(0, Builder::constant_value(at::full(shape, value.reshape({-1})[0].item(), value.options())));
}

void range(Builder& b) {
  const at::Tensor s = b.constant(0, "start"), l = b.constant(1, "limit"), d = b.constant(2, "delta");
  if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1 || d.item<double>() == 0.0) b.invalid("start, limit and delta must be single values, delta not 0");
  const double count = std::ceil((l.item<double>() - s.item<double>()) / d.item<double>());
  if (!(count < static_cast<double>(Builder::kMaxElements))) b.invalid("the range has more than 2^30 elements");
  b.bind(0, Builder::constant_value(at::arange(s.item(), l.item(), d.item(), s.options())));
}

void tile(Builder& b) {
  std::vector<int64_t> out = b.shape(0);
  const std::vector<int64_t> reps = const_ints(b, 1, "repeats");
  if (reps.size() != out.size()) b.invalid("repeats must hold one value per dim");
  for (size_t d = 0; d < out.size(); ++d) out[d] = std::max<int64_t>(out[d], 1) * reps[d];
  b.check_size(out, "the output");
  b.bind(0, b.call("aten::repeat", {Argument(b.tensor(0)), Argument(c10::IValue(reps))}));
}

}  // namespace

void add_shape_ops(ConverterTable& t) {
  t["Shape"] = shape;
  t["Gather"] = gather;
  t["Slice"] = slice;
  t["Concat"] = concat;
  t["Unsqueeze"] = unsqueeze;
  t["Squeeze"] = squeeze;
  t["Reshape"] = reshape;
  t["Flatten"] = flatten;
  t["Transpose"] = transpose;
  t["Expand"] = expand;
  t["Split"] = split;
  t["ConstantOfShape"] = constant_of_shape;
  t["Range"] = range;
  t["Tile"] = tile;
}

}  // namespace qfx::fx::onnx_detail
