// The op catalog's reductions of Core ATen beyond mean and sum: amax / amin / prod /
// any (ONNX ReduceMax, ReduceMin, ReduceProd; axes as the attribute of opsets up to
// 17), argmax / argmin, max.dim / min.dim (values and indices), var (the mean of
// squared deviations over N - correction), cumsum, and topk / sort (ONNX TopK).
#include "export_shape.h"
#include "op_families.h"

namespace qfx::quant::detail {
namespace {

// The dims argument `i` of `n` (an int or a list; absent or None: every dim, {}).
std::vector<int64_t> dims_arg(Exporter& e, const fx::Node& n, size_t i) {
  if (i >= n.args().size() || (n.args()[i].is_const() && n.args()[i].value.isNone())) return {};
  return e.ints_arg(n, i);
}

// ONNX `op` (ReduceMax, ReduceMin, ReduceProd) of value `x` over `axes` (empty: all).
std::string reduce(Exporter& e, const fx::Node& n, const std::string& op, const std::string& x, const std::vector<int64_t>& axes,
                   bool keep, const std::string& name) {
  const std::string y = e.fresh(name);
  e.last_ = e.node(op, {x}, y, name);
  if (!axes.empty()) e.reduce_axes(e.last_, axes);
  e.attr_i(e.last_, "keepdims", keep ? 1 : 0);
  return y;
}

void finish(Exporter& e, fx::Node& n, const std::string& y, size_t reduced, bool keep) {
  e.names_[&n] = y;
  const int r = e.rank_of(n.args().at(0));
  e.rank_[&n] = r < 0 ? -1 : keep ? r : reduced == 0 ? 0 : r - static_cast<int>(reduced);
}

// amax / amin (dims, keepdim) and prod (.default: all; .dim_int: one dim, keepdim).
std::function<void(Exporter&, fx::Node&)> reduction(std::string op) {
  return [op](Exporter& e, fx::Node& n) {
    const std::vector<int64_t> axes = dims_arg(e, n, 1);
    const bool keep = e.num_arg(n, 2, 0) != 0;
    finish(e, n, reduce(e, n, op, e.input_in_dtype(n), axes, keep, n.name()), axes.size(), keep);
  };
}

// any (.default, .dim, .dims): ReduceMax of x != 0 as float, back to bool.
void any(Exporter& e, fx::Node& n) {
  const std::vector<int64_t> axes = dims_arg(e, n, 1);
  const bool keep = e.num_arg(n, 2, 0) != 0;
  const std::string x = e.operand_as(n, n.args().at(0), at::kBool);
  const std::string f = e.fresh(n.name() + "_float");
  e.attr_i(e.node("Cast", {x}, f, f), "to", onnx::TensorProto::FLOAT);
  const std::string m = reduce(e, n, "ReduceMax", f, axes, keep, n.name() + "_max");
  const std::string y = e.fresh(n.name());
  e.attr_i(e.node("Cast", {m}, y, n.name()), "to", onnx::TensorProto::BOOL);
  finish(e, n, y, axes.size(), keep);
}

// argmax / argmin (dim, keepdim); dim None: over the flattened tensor.
std::string arg_extreme(Exporter& e, fx::Node& n, const std::string& op, const std::string& name) {
  std::string x = e.value(n, n.args().at(0));
  const std::vector<int64_t> dim = dims_arg(e, n, 1);
  const bool keep = e.num_arg(n, 2, 0) != 0;
  if (dim.empty()) {
    if (keep) unsupported(n, op + " of all elements with keepdim");
    const std::string flat = e.fresh(n.name() + "_flat");
    e.node("Reshape", {x, e.ints_init("shape", {-1})}, flat, flat);
    x = flat;
  }
  const std::string y = e.fresh(name);
  e.last_ = e.node(op, {x}, y, name);
  e.attr_i(e.last_, "axis", dim.empty() ? 0 : dim[0]);
  e.attr_i(e.last_, "keepdims", keep ? 1 : 0);
  return y;
}

// max.dim / min.dim: (values, indices) over one dim.
std::function<void(Exporter&, fx::Node&)> extreme_dim(bool max) {
  return [max](Exporter& e, fx::Node& n) {
    const std::vector<int64_t> dim = dims_arg(e, n, 1);
    if (dim.size() != 1) unsupported(n, "max / min over other than one dim");
    const bool keep = e.num_arg(n, 2, 0) != 0;
    const std::string v = reduce(e, n, max ? "ReduceMax" : "ReduceMin", e.value(n, n.args().at(0)), dim, keep, n.name() + "_values");
    const std::string i = arg_extreme(e, n, max ? "ArgMax" : "ArgMin", n.name() + "_indices");
    e.tuple_items_[&n] = {v, i};
    finish(e, n, v, 1, keep);
  };
}

// var (.dim: unbiased; .correction: the keyword, default 1): sum((x - mean)^2) / (N - c).
void var(Exporter& e, fx::Node& n) {
  std::vector<int64_t> axes = dims_arg(e, n, 1);
  double correction = n.target().find(".dim") != std::string::npos ? (e.num_arg(n, 2, 1) != 0 ? 1.0 : 0.0) : 1.0;
  bool keep = n.target().find(".dim") != std::string::npos && e.num_arg(n, 3, 0) != 0;
  for (const auto& [k, a] : n.kwargs()) {
    if (k == "correction" && a.is_const() && (a.value.isInt() || a.value.isDouble())) correction = a.value.isInt() ? a.value.toInt() : a.value.toDouble();
    if (k == "keepdim" && a.is_const() && a.value.isBool()) keep = a.value.toBool();
  }
  const auto& d = dims_of(e, n, n.args().at(0));
  if (axes.empty())
    for (size_t i = 0; i < d.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  double count = 1;
  for (int64_t a : axes) {
    const Dim& k = d.at(static_cast<size_t>(norm_dim(n, a, d.size())));
    if (k.batch || k.value < 0) unsupported(n, "var over a dynamic dim");
    count *= static_cast<double>(k.value);
  }
  const std::string x = e.value(n, n.args().at(0)), b = n.name();
  const std::string mean = e.fresh(b + "_mean");
  e.last_ = e.node("ReduceMean", {x}, mean, mean);
  e.reduce_axes(e.last_, axes);
  const std::string dev = e.two_input("Sub", x, mean, b + "_dev");
  const std::string sq = e.two_input("Mul", dev, dev, b + "_sq");
  const std::string sum = e.fresh(b + "_sum");
  e.last_ = e.node("ReduceSum", {sq, e.ints_init(b + "_axes", axes)}, sum, sum);
  e.attr_i(e.last_, "keepdims", keep ? 1 : 0);
  const std::string y = e.two_input("Div", sum, e.init("count", at::full({}, static_cast<float>(std::max(0.0, count - correction)))), b);
  finish(e, n, y, axes.size(), keep);
}

// cumsum(x, dim): ONNX CumSum with the axis as a 0-d int64 input.
void cumsum(Exporter& e, fx::Node& n) {
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("CumSum", {e.input_in_dtype(n), e.init("axis", at::scalar_tensor(e.ints_arg(n, 1).at(0), at::kLong))}, y, n.name());
  finish(e, n, y, 0, true);
}

// topk(x, k, dim=-1, largest=True, sorted=True) and sort(x, dim=-1, descending=False)
// (a TopK over the whole dim, which must be static): ONNX TopK's values and indices.
std::function<void(Exporter&, fx::Node&)> top(bool sort) {
  return [sort](Exporter& e, fx::Node& n) {
    const int64_t dim = static_cast<int64_t>(e.num_arg(n, sort ? 1 : 2, -1));
    int64_t k = 0;
    if (sort) {
      const auto& d = dims_of(e, n, n.args().at(0));
      const Dim& s = d.at(static_cast<size_t>(norm_dim(n, dim, d.size())));
      if (s.batch || s.value < 0) unsupported(n, "sort along a dynamic dim");
      k = s.value;
    } else {
      k = e.ints_arg(n, 1).at(0);
    }
    const bool largest = sort ? e.num_arg(n, 2, 0) != 0 : e.num_arg(n, 3, 1) != 0;
    const std::string v = e.fresh(n.name() + "_values"), i = e.fresh(n.name() + "_indices");
    e.last_ = e.node("TopK", {e.value(n, n.args().at(0)), e.ints_init("k", {k})}, v, n.name());
    e.last_->add_output(i);
    e.attr_i(e.last_, "axis", dim);
    e.attr_i(e.last_, "largest", largest ? 1 : 0);
    e.attr_i(e.last_, "sorted", 1);
    e.tuple_items_[&n] = {v, i};
    finish(e, n, v, 0, true);
  };
}

}  // namespace

void register_reduce_ops(OpCatalog& c) {
  c.add(OpRecord("amax").describe("the largest value over dims (ONNX ReduceMax)").writes({"ReduceMax"}).to_onnx(reduction("ReduceMax")));
  c.add(OpRecord("amin").describe("the smallest value over dims (ONNX ReduceMin)").writes({"ReduceMin"}).to_onnx(reduction("ReduceMin")));
  c.add(OpRecord("prod").describe("the product over one dim or all (ONNX ReduceProd)").reads_kwargs({"dtype"})
            .writes({"ReduceProd"}).to_onnx(reduction("ReduceProd")));
  c.add(OpRecord("any").describe("whether any value over dims is nonzero (ONNX Cast, ReduceMax, Cast)")
            .writes({"Cast", "ReduceMax"}).to_onnx(any));
  c.add(OpRecord("argmax").describe("the index of the largest value (ONNX ArgMax)").writes({"ArgMax", "Reshape"})
            .to_onnx([](Exporter& e, fx::Node& n) { finish(e, n, arg_extreme(e, n, "ArgMax", n.name()), 1, e.num_arg(n, 2, 0) != 0); }));
  c.add(OpRecord("argmin").describe("the index of the smallest value (ONNX ArgMin)").writes({"ArgMin", "Reshape"})
            .to_onnx([](Exporter& e, fx::Node& n) { finish(e, n, arg_extreme(e, n, "ArgMin", n.name()), 1, e.num_arg(n, 2, 0) != 0); }));
  c.add(OpRecord("max").describe("max.dim: values and indices (ONNX ReduceMax, ArgMax)").writes({"ReduceMax", "ArgMax"}).to_onnx(extreme_dim(true)));
  c.add(OpRecord("min").describe("min.dim: values and indices (ONNX ReduceMin, ArgMin)").writes({"ReduceMin", "ArgMin"}).to_onnx(extreme_dim(false)));
  c.add(OpRecord("var").describe("variance over dims with a correction (ONNX ReduceMean, Sub, Mul, ReduceSum, Div)")
            .reads_kwargs({"correction", "keepdim"}).writes({"ReduceMean", "Sub", "Mul", "ReduceSum", "Div"}).to_onnx(var));
  c.add(OpRecord("cumsum").describe("the running sum along a dim (ONNX CumSum)").reads_kwargs({"dtype"}).writes({"CumSum"}).to_onnx(cumsum));
  c.add(OpRecord("topk").describe("the k largest or smallest values and their indices (ONNX TopK)").writes({"TopK"}).to_onnx(top(false)));
  c.add(OpRecord("sort").describe("values sorted along a static dim and their indices (ONNX TopK over the dim)").writes({"TopK"})
            .to_onnx(top(true)));
}

}  // namespace qfx::quant::detail
