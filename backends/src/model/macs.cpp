// Model::multiply_accumulates: the work of one run, from a plan's shapes.
#include <numeric>

#include "model_impl.h"
#include "qfx/error.h"

namespace qfx::runtime {
namespace {

int64_t numel(const std::vector<int64_t>& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, [](int64_t a, int64_t b) { return a * b; });
}

}  // namespace

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
    const std::string& op = im.g.nodes[n].op;
    const auto& ins = im.node_in[n];
    if (ins.size() < 2 || ins[0] < 0 || ins[1] < 0 || im.node_out[n].empty() || im.node_out[n][0] < 0) continue;
    const auto& x = shape(ins[0]);
    const auto& w = shape(ins[1]);
    const auto& y = shape(im.node_out[n][0]);
    if (x.empty() || w.empty() || y.empty() || w[0] <= 0) continue;
    if (op == "Conv" || op == "QLinearConv")
      macs += numel(y) * (numel(w) / w[0]);
    else if (op == "ConvTranspose")
      macs += numel(x) * (numel(w) / w[0]);
    else if (op == "Gemm" || op == "QGemm")
      macs += numel(y) * (im.g.nodes[n].attr_i("transA", 0) != 0 ? x[0] : x.back());
    else if (op == "MatMul" || op == "QLinearMatMul")
      macs += numel(y) * x.back();
  }
  im.return_plan(sig, std::move(plan));
  return macs;
}

}  // namespace qfx::runtime
