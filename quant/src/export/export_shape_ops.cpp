// export_onnx's shape arithmetic (see exporter.h): size(), ints computed from
// sizes, view/reshape with computed shapes, transpose, chunk.
#include "exporter.h"

namespace qfx::quant::detail {

const std::vector<Dim>& Exporter::dims_of(const fx::Node& user, const fx::Argument& a) {
  if (!have_dims_) {
    dims_ = detail::batch_shapes(gm_, opt_.input_shapes);
    have_dims_ = true;
  }
  if (!a.is_node()) unsupported(user, "a non-tensor argument where a tensor is expected");
  auto it = dims_.find(a.node);
  if (it == dims_.end()) unsupported(user, "the shape of '" + a.node->name() + "' is unknown");
  return it->second;
}

bool Exporter::is_int(const fx::Argument& a) const { return (a.is_const() && a.value.isInt()) || (a.is_node() && ints_.count(a.node)); }

Dim Exporter::int_of(const fx::Node& user, const fx::Argument& a) {
  if (a.is_const() && a.value.isInt()) return {a.value.toInt(), false};
  if (a.is_node()) {
    auto it = ints_.find(a.node);
    if (it != ints_.end()) return it->second;
  }
  unsupported(user, "an int that is neither a constant nor computed from sizes");
}

int64_t Exporter::norm_dim(const fx::Node& n, int64_t d, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (d < -r || d >= r) unsupported(n, "dim " + std::to_string(d) + " out of range for rank " + std::to_string(r));
  return d < 0 ? d + r : d;
}

void Exporter::size_op(fx::Node* n) {
  const auto& d = dims_of(*n, n->args().at(0));
  if (n->args().size() > 1) ints_[n] = d[static_cast<size_t>(norm_dim(*n, ints_arg(*n, 1).at(0), d.size()))];
  else int_lists_[n] = d;
}

void Exporter::getitem(fx::Node* n) {
  const fx::Argument& src = n->args().at(0);
  if (src.is_node() && int_lists_.count(src.node)) {
    const auto& l = int_lists_[src.node];
    ints_[n] = l[static_cast<size_t>(norm_dim(*n, ints_arg(*n, 1).at(0), l.size()))];
    return;
  }
  if (src.is_node() && tuple_items_.count(src.node)) {
    const auto& items = tuple_items_[src.node];
    names_[n] = items[static_cast<size_t>(norm_dim(*n, ints_arg(*n, 1).at(0), items.size()))];
    rank_[n] = rank_of(src);
    return;
  }
  unsupported(*n, "getitem of a value that is not a size or a chunk");
}

void Exporter::int_arith(fx::Node* n, const std::string& op) {
  const Dim a = int_of(*n, n->args().at(0)), b = int_of(*n, n->args().at(1));
  // A multiple of the batch times a constant, or divided by a divisor of its
  // multiple, stays a multiple of the batch (MultiheadAttention's bsz * num_heads).
  if (op == "mul" && a.batch != b.batch && (a.batch ? b : a).value >= 0) {
    const Dim& k = a.batch ? a : b;
    const Dim& c = a.batch ? b : a;
    ints_[n] = c.value == 0 ? Dim{0, false} : Dim{k.value * c.value, true};
    return;
  }
  if (op == "floordiv" && a.batch && !b.batch && b.value > 0 && a.value % b.value == 0) {
    ints_[n] = {a.value / b.value, true};
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
  ints_[n] = {v, false};
}

void Exporter::reshape(fx::Node* n) {
  const fx::Argument& sa = n->args().at(1);
  std::vector<Dim> entries;
  if (sa.is_const()) {
    for (auto v : ints_arg(*n, 1)) entries.push_back({v, false});
  } else if (sa.is_node() && int_lists_.count(sa.node)) {
    entries = int_lists_[sa.node];
  } else {
    for (const auto& it : sa.items) entries.push_back(int_of(*n, it));
  }
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
    const Dim in0 = dims_of(*n, n->args().at(0)).at(0);
    if (i == 0 && in0.batch && in0.value == e.value) {
      shape.push_back(0);
    } else if (!minus_one) {
      shape.push_back(-1);
      minus_one = true;
    } else {
      unsupported(*n, "a shape with the dynamic batch where ONNX Reshape cannot express it");
    }
  }
  const std::string y = fresh(n->name());
  node("Reshape", {value(*n, n->args().at(0)), init("shape", at::tensor(shape, at::kLong))}, y, n->name());
  names_[n] = y;
  rank_[n] = static_cast<int>(shape.size());
}

void Exporter::transpose(fx::Node* n) {
  int r = rank_of(n->args().at(0));
  if (r < 0) r = static_cast<int>(dims_of(*n, n->args().at(0)).size());
  std::vector<int64_t> perm(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) perm[static_cast<size_t>(i)] = i;
  const int64_t a = n->args().size() > 1 ? norm_dim(*n, ints_arg(*n, 1).at(0), perm.size()) : 0;
  const int64_t b = n->args().size() > 2 ? norm_dim(*n, ints_arg(*n, 2).at(0), perm.size()) : 1;
  if (r < 2) unsupported(*n, "transpose of a rank " + std::to_string(r) + " value");
  std::swap(perm[static_cast<size_t>(a)], perm[static_cast<size_t>(b)]);
  unary(n, "Transpose");
  attr_ints(last_, "perm", perm);
}

void Exporter::chunk(fx::Node* n) {
  const auto& d = dims_of(*n, n->args().at(0));
  const int64_t chunks = ints_arg(*n, 1).at(0);
  const int64_t dim = norm_dim(*n, n->args().size() > 2 ? ints_arg(*n, 2).at(0) : 0, d.size());
  const Dim D = d[static_cast<size_t>(dim)];
  if (D.batch || D.value < 0) unsupported(*n, "chunk along the dynamic batch");
  if (chunks <= 0) unsupported(*n, "chunks must be positive");
  const int64_t size = (D.value + chunks - 1) / chunks;
  const std::string& x = value(*n, n->args().at(0));
  std::vector<std::string> items;
  for (int64_t b = 0; b < D.value || (D.value == 0 && items.empty()); b += std::max<int64_t>(size, 1)) {
    const std::string y = fresh(n->name() + "_" + std::to_string(items.size()));
    node("Slice", {x, init("starts", at::tensor(std::vector<int64_t>{b}, at::kLong)),
                   init("ends", at::tensor(std::vector<int64_t>{std::min(b + size, D.value)}, at::kLong)),
                   init("axes", at::tensor(std::vector<int64_t>{dim}, at::kLong))},
         y, n->name() + "_" + std::to_string(items.size()));
    items.push_back(y);
    if (D.value == 0) break;
  }
  tuple_items_[n] = items;
  rank_[n] = rank_of(n->args().at(0));
}

}  // namespace qfx::quant::detail
