// The op catalog's lookups: embedding and index_select as ONNX Gather (the float
// table stays an initializer; the indices are an int64 input or value).
#include "exporter.h"
#include "op_families.h"

namespace qfx::quant::detail {

namespace {

void gather(Exporter& ex, fx::Node& node, bool emb) {
  fx::Node* n = &node;
  // embedding(weight, indices, padding_idx, ...): rows of the table (padding_idx only
  // matters for gradients); index_select(self, dim, index): a 1-D index along dim.
  const fx::Argument& data = n->args().at(emb ? 0 : 0);
  const fx::Argument& idx = n->args().at(emb ? 1 : 2);
  const int64_t axis = emb ? 0 : ex.ints_arg(*n, 1).at(0);
  const std::string y = ex.fresh(n->name());
  ex.last_ = ex.node("Gather", {ex.value(*n, data), ex.value(*n, idx)}, y, n->name());
  ex.attr_i(ex.last_, "axis", axis);
  ex.names_[n] = y;
  const int rd = ex.rank_of(data), ri = ex.rank_of(idx);
  ex.rank_[n] = rd < 0 || ri < 0 ? -1 : rd + ri - 1;
}

}  // namespace

void register_gather_ops(OpCatalog& c) {
  c.add(OpRecord("embedding").describe("rows of a table (ONNX Gather, axis 0)").writes({"Gather"}).to_onnx([](Exporter& e, fx::Node& n) { gather(e, n, true); }));
  c.add(OpRecord("index_select").describe("a 1-D index along one dim (ONNX Gather)").writes({"Gather"}).to_onnx([](Exporter& e, fx::Node& n) {
    gather(e, n, false);
  }));
}

}  // namespace qfx::quant::detail
