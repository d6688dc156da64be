// The op catalog's tensor creation and data movement of Core ATen: arange (ONNX Range
// when a bound is a size of the dynamic batch; constants fold), full / empty with a
// batch-dependent size, full_like / fill (Expand of the value to the input's Shape),
// copy (src cast and broadcast to self), flip (Slice with step -1) and repeat (Tile).
#include "export_shape.h"

#include <limits>
#include "op_families.h"
#include "qfx/quant/op_names.h"

namespace qfx::quant::detail {
namespace {

// The `dtype` keyword of `n`, else `def`.
at::ScalarType dtype_kwarg(const fx::Node& n, at::ScalarType def) {
  for (const auto& [k, a] : n.kwargs())
    if (k == "dtype" && a.is_const() && a.value.isInt()) return static_cast<at::ScalarType>(a.value.toInt());
  return def;
}

// A 0-d initializer of `v` in the exported form of `t` (float64 as float32).
std::string scalar(Exporter& e, const fx::Node& n, const fx::Argument& v, at::ScalarType t) {
  if (t == at::kDouble || t == at::kHalf || t == at::kBFloat16) t = at::kFloat;
  if (Exporter::onnx_type(t) < 0) unsupported(n, std::string("a tensor of ") + c10::toString(t));
  return e.operand_as(n, v, t);
}

// A number argument as a 0-d int64 / float ONNX value: a constant, or a size of the
// dynamic batch (Shape of the first input, sliced, squeezed).
std::string bound(Exporter& e, fx::Node& n, const fx::Argument& a, at::ScalarType t) {
  if (a.is_const()) return scalar(e, n, a, t);
  const std::string v = sizes_value(e, n, {int_of(e, n, a)}, "bound");
  const std::string s = e.fresh(n.name() + "_bound");
  e.node("Squeeze", {v, e.ints_init("axes", {0})}, s, s);
  if (t == at::kLong) return s;
  const std::string c = e.fresh(n.name() + "_bound_cast");
  e.attr_i(e.node("Cast", {s}, c, c), "to", Exporter::onnx_type(t));
  return c;
}

// arange(end), arange.start(start, end), arange.start_step(start, end, step=1),
// dtype=None: ONNX Range.
void arange(Exporter& e, fx::Node& n) {
  if (n.args().empty()) unsupported(n, "arange without an end");
  bool floats = false;
  for (size_t i = 0; i < n.args().size(); ++i) floats |= n.args()[i].is_const() && n.args()[i].value.isDouble();
  const at::ScalarType t = dtype_kwarg(n, floats ? at::kFloat : at::kLong);
  const fx::Argument zero(c10::IValue(int64_t{0})), one(c10::IValue(int64_t{1}));
  const bool end_only = n.args().size() == 1;
  const std::string start = bound(e, n, end_only ? zero : n.args()[0], t), end = bound(e, n, n.args()[end_only ? 0 : 1], t);
  const std::string step = bound(e, n, n.args().size() > 2 ? n.args()[2] : one, t);
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("Range", {start, end, step}, y, n.name());
  e.names_[&n] = y;
  e.rank_[&n] = 1;
}

// full(size, value, dtype) / empty(size, dtype) (empty: zeros) with a size of the
// dynamic batch: Expand of the value to the sizes.
void full(Exporter& e, fx::Node& n, bool empty) {
  const std::vector<Dim> sizes = size_list(e, n, 0);
  const bool given = !empty && n.args().size() > 1 && n.args()[1].is_const();
  if (!empty && !given) unsupported(n, "a fill value that is not a constant");
  const c10::IValue& v = given ? n.args()[1].value : c10::IValue(0.0);
  const at::ScalarType t = dtype_kwarg(n, empty || v.isDouble() ? at::kFloat : v.isBool() ? at::kBool : at::kLong);
  const fx::Argument zero(c10::IValue(0.0));
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("Expand", {scalar(e, n, empty ? zero : n.args().at(1), t), sizes_value(e, n, sizes, "sizes")}, y, n.name());
  e.names_[&n] = y;
  e.rank_[&n] = static_cast<int>(sizes.size());
}

// full_like(x, value, dtype=None) and fill.Scalar(x, value): the value, in x's dtype
// (or the one given), expanded to x's shape; zeros_like(x): `zero`.
void full_like(Exporter& e, fx::Node& n, bool zero = false) {
  const at::ScalarType t = dtype_kwarg(n, e.dtype_of(n.args().at(0)).value_or(at::kFloat));
  const std::string shape = e.fresh(n.name() + "_shape");
  e.node("Shape", {e.value(n, n.args().at(0))}, shape, shape);
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("Expand", {scalar(e, n, zero ? fx::Argument(c10::IValue(0.0)) : n.args().at(1), t), shape}, y, n.name());
  e.names_[&n] = y;
  e.rank_[&n] = e.rank_of(n.args().at(0));
}

// zeros(size) / zeros_like(x): left out where only recurrent layers read it (their
// default initial state, which ONNX's LSTM / GRU take as absent), else the zeros.
void zeros(Exporter& e, fx::Node& n, bool like) {
  bool recurrent_only = !n.users().empty();
  for (const fx::Node* u : n.users()) recurrent_only = recurrent_only && is_recurrent_op(canonical_op_name(*u, e.gm_));
  if (recurrent_only) return;
  if (like) return full_like(e, n, true);
  full(e, n, true);
}

// copy(self, src): src in self's dtype, broadcast to self's shape.
void copy(Exporter& e, fx::Node& n) {
  const std::string shape = e.fresh(n.name() + "_shape");
  e.node("Shape", {e.value(n, n.args().at(0))}, shape, shape);
  const std::string src = e.operand_as(n, n.args().at(1), e.dtype_of(n.args().at(0)).value_or(at::kFloat));
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("Expand", {src, shape}, y, n.name());
  e.names_[&n] = y;
  e.rank_[&n] = e.rank_of(n.args().at(0));
}

// flip(x, dims): ONNX Slice of every listed dim from its end backwards.
void flip(Exporter& e, fx::Node& n) {
  const std::vector<int64_t> dims = e.ints_arg(n, 1);
  const std::vector<int64_t> starts(dims.size(), -1), ends(dims.size(), std::numeric_limits<int64_t>::min() + 1),
      steps(dims.size(), -1);
  e.unary(&n, "Slice", 0, {e.ints_init("starts", starts), e.ints_init("ends", ends), e.ints_init("axes", dims), e.ints_init("steps", steps)});
}

// repeat(x, repeats): ONNX Tile; more repeats than x has dims: x reshaped with
// leading 1s first (aten's rule).
void repeat(Exporter& e, fx::Node& n) {
  const std::vector<int64_t> reps = e.ints_arg(n, 1);
  const std::vector<Dim>& d = dims_of(e, n, n.args().at(0));
  if (reps.size() < d.size()) unsupported(n, "repeat with fewer repeats than dims");
  std::string x = e.value(n, n.args().at(0));
  if (reps.size() > d.size()) {
    const std::string r = e.fresh(n.name() + "_ranked");
    e.node("Unsqueeze", {x, e.ints_init("axes", [&] {
             std::vector<int64_t> a;
             for (size_t i = 0; i < reps.size() - d.size(); ++i) a.push_back(static_cast<int64_t>(i));
             return a;
           }())}, r, r);
    x = r;
  }
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("Tile", {x, e.ints_init("repeats", reps)}, y, n.name());
  e.names_[&n] = y;
  e.rank_[&n] = static_cast<int>(reps.size());
}

}  // namespace

void register_creation_ops(OpCatalog& c) {
  c.add(OpRecord("arange").describe("start, start + step, ... below end (ONNX Range; constant bounds fold)").reads_kwargs({"dtype"})
            .writes({"Range", "Shape", "Slice", "Concat", "Squeeze", "Cast"}).to_onnx(arange));
  c.add(OpRecord("full").describe("a tensor of one value (ONNX Expand to the sizes; constant sizes fold)").reads_kwargs({"dtype"})
            .writes({"Expand", "Shape", "Slice", "Concat"}).to_onnx([](Exporter& e, fx::Node& n) { full(e, n, false); }));
  c.add(OpRecord("empty").describe("an uninitialised tensor, exported as zeros (ONNX Expand to the sizes)").reads_kwargs({"dtype"})
            .writes({"Expand", "Shape", "Slice", "Concat"}).to_onnx([](Exporter& e, fx::Node& n) { full(e, n, true); }));
  c.add(OpRecord("zeros").describe("zeros (ONNX Expand to the sizes); a recurrent layer's default initial state is left out")
            .reads_kwargs({"dtype"}).writes({"Expand", "Shape", "Slice", "Concat"})
            .to_onnx([](Exporter& e, fx::Node& n) { zeros(e, n, false); }));
  c.add(OpRecord("zeros_like").describe("zeros in x's shape (ONNX Shape, Expand); a recurrent layer's default initial state is left out")
            .reads_kwargs({"dtype"}).writes({"Shape", "Expand"}).to_onnx([](Exporter& e, fx::Node& n) { zeros(e, n, true); }));
  c.add(OpRecord("full_like").also_aten({"fill"}).describe("one value in x's shape (ONNX Shape, Expand)").reads_kwargs({"dtype"})
            .writes({"Shape", "Expand"}).to_onnx([](Exporter& e, fx::Node& n) { full_like(e, n); }));
  c.add(OpRecord("copy").describe("src cast and broadcast to self's shape (ONNX Shape, Expand)").writes({"Shape", "Expand"}).to_onnx(copy));
  c.add(OpRecord("flip").describe("dims reversed (ONNX Slice, step -1)").writes({"Slice"}).to_onnx(flip));
  c.add(OpRecord("repeat").describe("x tiled (ONNX Tile)").writes({"Unsqueeze", "Tile"}).to_onnx(repeat));
}

}  // namespace qfx::quant::detail
