// The op catalog's indexing beyond Gather: index.Tensor (ONNX Gather for one index
// tensor, GatherND for several), gather (GatherElements), scatter / scatter_add /
// scatter_reduce (ScatterElements), index_put (ScatterND), slice_scatter and
// select_scatter (Slice + Concat), following the aten semantics of each.
#include "export_shape.h"
#include "op_families.h"

namespace qfx::quant::detail {
namespace {

bool is_none(const fx::Argument& a) { return a.is_const() && a.value.isNone(); }

// ONNX `op` writing a fresh value named after `name`; the node is named `name` when it
// is n's result (`result`), else after its value (node names are unique in a model).
std::string named_node(Exporter& e, const std::string& op, const std::vector<std::string>& in, const std::string& name,
                       bool result = false) {
  const std::string y = e.fresh(name);
  e.last_ = e.node(op, in, y, result ? name : y);
  return y;
}

// index(x, indices): the index tensors (int64; bool masks are not exported) at
// consecutive dims k..k+m-1. One: Gather on dim k. Several: broadcast to one shape,
// stacked on a new last dim, GatherND over x with those dims moved to the front, then
// the result's dims moved back behind x's first k (aten's layout for adjacent indices).
void index(Exporter& e, fx::Node& n) {
  const fx::Argument& list = n.args().at(1);
  std::vector<const fx::Argument*> idx;
  const std::vector<fx::Argument>& entries = list.items;
  int64_t first = -1;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (is_none(entries[i])) continue;
    if (first >= 0 && static_cast<int64_t>(i) != first + static_cast<int64_t>(idx.size()))
      unsupported(n, "index tensors at dims that are not adjacent");
    if (first < 0) first = static_cast<int64_t>(i);
    if (e.dtype_of(entries[i]) == at::kBool) unsupported(n, "a bool mask index (its result's shape depends on the values)");
    idx.push_back(&entries[i]);
  }
  if (idx.empty()) unsupported(n, "index without an index tensor");
  const std::string x = e.value(n, n.args().at(0));
  const int r = static_cast<int>(dims_of(e, n, n.args().at(0)).size());
  if (idx.size() == 1) {
    const std::string y = named_node(e, "Gather", {x, e.value(n, *idx[0])}, n.name(), true);
    e.attr_i(e.last_, "axis", first);
    e.names_[&n] = y;
    e.rank_[&n] = r - 1 + static_cast<int>(dims_of(e, n, *idx[0]).size());
    return;
  }
  const int m = static_cast<int>(idx.size()), k = static_cast<int>(first);
  // Broadcast: each index plus zeros shaped like all the others (ONNX numpy broadcast).
  std::string zero;
  for (const auto* a : idx) {
    const std::string z = e.two_input("Mul", e.value(n, *a), e.init("zero", at::scalar_tensor(0, at::kLong)), n.name() + "_zero");
    zero = zero.empty() ? z : e.two_input("Add", zero, z, n.name() + "_zeros");
  }
  int q = 0;
  for (const auto* a : idx) q = std::max(q, static_cast<int>(dims_of(e, n, *a).size()));
  std::vector<std::string> cols;
  for (const auto* a : idx)
    cols.push_back(named_node(e, "Unsqueeze", {e.two_input("Add", e.value(n, *a), zero, n.name() + "_broadcast"), e.ints_init("axes", {q})},
                              n.name() + "_col"));
  const std::string stacked = named_node(e, "Concat", cols, n.name() + "_stacked");
  e.attr_i(e.last_, "axis", -1);
  std::string data = x;
  if (k > 0) {
    std::vector<int64_t> perm;
    for (int d = k; d < k + m; ++d) perm.push_back(d);
    for (int d = 0; d < k; ++d) perm.push_back(d);
    for (int d = k + m; d < r; ++d) perm.push_back(d);
    data = named_node(e, "Transpose", {x}, n.name() + "_front");
    e.attr_ints(e.last_, "perm", perm);
  }
  std::string y = named_node(e, "GatherND", {data, stacked}, n.name() + (k > 0 ? "_gathered" : ""), k == 0);
  const int out = q + r - m;
  if (k > 0) {
    std::vector<int64_t> perm;
    for (int d = q; d < q + k; ++d) perm.push_back(d);
    for (int d = 0; d < q; ++d) perm.push_back(d);
    for (int d = q + k; d < out; ++d) perm.push_back(d);
    y = named_node(e, "Transpose", {y}, n.name(), true);
    e.attr_ints(e.last_, "perm", perm);
  }
  e.names_[&n] = y;
  e.rank_[&n] = out;
}

// gather(x, dim, index): ONNX GatherElements.
void gather(Exporter& e, fx::Node& n) {
  e.names_[&n] = named_node(e, "GatherElements", {e.value(n, n.args().at(0)), e.value(n, n.args().at(2))}, n.name(), true);
  e.attr_i(e.last_, "axis", e.ints_arg(n, 1).at(0));
  e.rank_[&n] = e.rank_of(n.args().at(0));
}

// scatter.src / .value, scatter_add, scatter_reduce.two (sum, prod; include_self):
// ONNX ScatterElements (reduction add / mul from opset 16); a value as the index's shape.
void scatter(Exporter& e, fx::Node& n) {
  const std::string op = canonical_op_name(n, e.gm_);
  std::string reduction = op == "scatter_add" ? "add" : "none";
  if (op == "scatter_reduce") {
    const std::string r = n.args().size() > 4 && n.args()[4].is_const() && n.args()[4].value.isString() ? n.args()[4].value.toStringRef() : "";
    for (const auto& [k, a] : n.kwargs())
      if (k == "include_self" && a.is_const() && a.value.isBool() && !a.value.toBool()) unsupported(n, "scatter_reduce with include_self=False");
    if (r != "sum" && r != "prod") unsupported(n, "scatter_reduce '" + r + "' (ONNX ScatterElements at opsets up to 17 reduces by sum or prod)");
    reduction = r == "sum" ? "add" : "mul";
  }
  if (reduction != "none" && e.opt_.opset < 16) unsupported(n, op + " needs ONNX opset 16 or newer (ScatterElements' reduction)");
  const std::string x = e.value(n, n.args().at(0)), idx = e.value(n, n.args().at(2));
  std::string src;
  if (n.args().at(3).is_node()) {
    src = e.value(n, n.args().at(3));
  } else {
    const std::string shape = named_node(e, "Shape", {idx}, n.name() + "_index_shape");
    const at::ScalarType t = e.dtype_of(n.args().at(0)).value_or(at::kFloat);
    src = named_node(e, "Expand", {e.operand_as(n, n.args().at(3), t), shape}, n.name() + "_src");
  }
  e.names_[&n] = named_node(e, "ScatterElements", {x, idx, src}, n.name(), true);
  e.attr_i(e.last_, "axis", e.ints_arg(n, 1).at(0));
  if (reduction != "none") e.attr_s(e.last_, "reduction", reduction);
  e.rank_[&n] = e.rank_of(n.args().at(0));
}

// index_put(x, [i], v, accumulate): one int64 index on dim 0 as ONNX ScatterND of
// the rows (v broadcast to i's shape + x's other dims), reduction add when accumulating.
void index_put(Exporter& e, fx::Node& n) {
  const fx::Argument& list = n.args().at(1);
  if (list.items.size() != 1 || is_none(list.items[0])) unsupported(n, "index_put with other than one index tensor on dim 0");
  if (e.dtype_of(list.items[0]) == at::kBool) unsupported(n, "index_put with a bool mask");
  if (e.num_arg(n, 3, 0) != 0 && e.opt_.opset < 16) unsupported(n, "index_put accumulating needs ONNX opset 16 or newer (ScatterND's reduction)");
  const std::vector<int64_t> xs = dims_static(e, n, n.args().at(0)), is = dims_static(e, n, list.items[0]);
  std::vector<int64_t> vs = is;
  vs.insert(vs.end(), xs.begin() + 1, xs.end());
  const std::string v = named_node(e, "Expand", {e.value(n, n.args().at(2)), e.ints_init("shape", vs)}, n.name() + "_values");
  const std::string i = named_node(e, "Unsqueeze", {e.value(n, list.items[0]), e.ints_init("axes", {static_cast<int64_t>(is.size())})},
                                   n.name() + "_index");
  e.names_[&n] = named_node(e, "ScatterND", {e.value(n, n.args().at(0)), i, v}, n.name(), true);
  if (e.num_arg(n, 3, 0) != 0) e.attr_s(e.last_, "reduction", "add");
  e.rank_[&n] = static_cast<int>(xs.size());
}

// slice_scatter(x, src, dim, start, end, step 1) and select_scatter(x, src, dim,
// index): x's parts before and after along dim around src, concatenated (ONNX Slice, Concat).
void slice_scatter(Exporter& e, fx::Node& n, bool select) {
  const std::vector<Dim>& d = dims_of(e, n, n.args().at(0));
  const int64_t dim = norm_dim(n, static_cast<int64_t>(e.num_arg(n, 2, 0)), d.size());
  const Dim& size = d[static_cast<size_t>(dim)];
  if (size.batch || size.value < 0) unsupported(n, "slice_scatter along a dynamic dim");
  auto clampi = [&](int64_t v) { return std::min(std::max(v < 0 ? v + size.value : v, int64_t{0}), size.value); };
  int64_t start = 0, end = 0;
  if (select) {
    start = clampi(static_cast<int64_t>(e.num_arg(n, 3, 0)));
    end = start + 1;
  } else {
    if (e.num_arg(n, 5, 1) != 1) unsupported(n, "slice_scatter with a step other than 1");
    const bool has_start = n.args().size() > 3 && !is_none(n.args()[3]), has_end = n.args().size() > 4 && !is_none(n.args()[4]);
    start = has_start ? clampi(static_cast<int64_t>(e.num_arg(n, 3, 0))) : 0;
    end = has_end ? std::max(start, clampi(static_cast<int64_t>(e.num_arg(n, 4, 0)))) : size.value;
  }
  const std::string x = e.value(n, n.args().at(0));
  std::string src = e.value(n, n.args().at(1));
  if (select) src = named_node(e, "Unsqueeze", {src, e.ints_init("axes", {dim})}, n.name() + "_row");
  std::vector<std::string> parts;
  if (start > 0) {
    parts.push_back(e.fresh(n.name() + "_before"));
    slice_axis(e, x, 0, start, dim, 1, parts.back(), parts.back());
  }
  parts.push_back(src);
  if (end < size.value) {
    parts.push_back(e.fresh(n.name() + "_after"));
    slice_axis(e, x, end, size.value, dim, 1, parts.back(), parts.back());
  }
  e.names_[&n] = named_node(e, "Concat", parts, n.name(), true);
  e.attr_i(e.last_, "axis", dim);
  e.rank_[&n] = static_cast<int>(d.size());
}

// unbind(x, dim): one Gather of each index along the (static) dim, which drops it;
// the pieces are what getitem reads.
void unbind(Exporter& e, fx::Node& n) {
  const std::vector<Dim>& d = dims_of(e, n, n.args().at(0));
  const int64_t dim = norm_dim(n, static_cast<int64_t>(e.num_arg(n, 1, 0)), d.size());
  const Dim& size = d[static_cast<size_t>(dim)];
  if (size.batch || size.value < 0) unsupported(n, "unbind along a dynamic dim");
  const std::string x = e.value(n, n.args().at(0));
  std::vector<std::string> items;
  for (int64_t i = 0; i < size.value; ++i) {
    items.push_back(named_node(e, "Gather", {x, e.init("index", at::scalar_tensor(i, at::kLong))}, n.name() + "_" + std::to_string(i)));
    e.attr_i(e.last_, "axis", dim);
  }
  e.tuple_items_[&n] = items;
  e.rank_[&n] = static_cast<int>(d.size()) - 1;
}

}  // namespace

void register_scatter_ops(OpCatalog& c) {
  c.add(OpRecord("unbind").describe("the slices along a dim (one ONNX Gather each)").writes({"Gather"}).to_onnx(unbind));
  c.add(OpRecord("index").describe("x[..., i, j, ...] by int64 index tensors at adjacent dims (ONNX Gather, GatherND)")
            .writes({"Gather", "GatherND", "Mul", "Add", "Unsqueeze", "Concat", "Transpose"}).to_onnx(index));
  c.add(OpRecord("gather").describe("values along a dim by an index of the same rank (ONNX GatherElements)").writes({"GatherElements"})
            .to_onnx(gather));
  for (const char* op : {"scatter", "scatter_add", "scatter_reduce"})
    c.add(OpRecord(op).describe("values written along a dim at an index (ONNX ScatterElements)").reads_kwargs({"include_self"})
              .writes({"ScatterElements", "Shape", "Expand"}).to_onnx(scatter));
  c.add(OpRecord("index_put").describe("rows of x at an int64 index replaced or accumulated (ONNX ScatterND)")
            .writes({"Expand", "Unsqueeze", "ScatterND"}).to_onnx(index_put));
  c.add(OpRecord("slice_scatter").describe("src written into a slice of x (ONNX Slice, Concat)").writes({"Slice", "Concat"})
            .to_onnx([](Exporter& e, fx::Node& n) { slice_scatter(e, n, false); }));
  c.add(OpRecord("select_scatter").describe("src written into one index of a dim of x (ONNX Slice, Unsqueeze, Concat)")
            .writes({"Slice", "Unsqueeze", "Concat"}).to_onnx([](Exporter& e, fx::Node& n) { slice_scatter(e, n, true); }));
}

}  // namespace qfx::quant::detail
