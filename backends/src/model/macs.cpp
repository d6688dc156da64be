// Model::multiply_accumulates: the work of one run, from a plan's shapes.
// Each op's count is its schema's (OpSchema::macs).
#include "model_impl.h"
#include "qfx/error.h"
#include "qfx/runtime/op_schema.h"

namespace qfx::runtime {

int64_t Model::multiply_accumulates(const std::vector<std::vector<int64_t>>& input_shapes) const {
  const Impl& im = *impl_;
  if (input_shapes.size() != im.inputs.size())
    throw DataError("multiply_accumulates: " + std::to_string(input_shapes.size()) + " input shapes for a model with " +
                    std::to_string(im.inputs.size()) + " inputs");
  std::string sig;
  for (const auto& s : input_shapes) sig += shape_str(s);
  std::unique_ptr<Plan> plan = im.take_plan(sig);
  if (!plan) plan = im.build(input_shapes);
  auto shape = [&](int v) -> const std::vector<int64_t>& { return plan->meta[static_cast<size_t>(v)].shape; };
  int64_t macs = 0;
  for (size_t n = 0; n < im.g.nodes.size(); ++n) {
    const ir::Node& node = im.g.nodes[n];
    const OpSchema* s = find_op_schema(node.op);
    const auto& ins = im.node_in[n];
    if (!s || !s->macs || ins.size() < 2 || ins[0] < 0 || ins[1] < 0 || im.node_out[n].empty() || im.node_out[n][0] < 0) continue;
    const auto& x = shape(ins[0]);
    const auto& w = shape(ins[1]);
    const auto& y = shape(im.node_out[n][0]);
    if (x.empty() || w.empty() || y.empty() || w[0] <= 0) continue;
    macs += s->macs({x, w, y, [&](const std::string& a, int64_t def) { return node.attr_i(a, def); }});
  }
  im.return_plan(sig, std::move(plan));
  return macs;
}

}  // namespace qfx::runtime
