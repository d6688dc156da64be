// The rewrites that make Core ATen programs (after run_decompositions()) quantize as
// module code does: each rewritten graph computes what the original did (libtorch's
// kernels on both), and has the form the quantizer matches.
#include <gtest/gtest.h>
#include <ATen/ATen.h>

#include <limits>

#include "qfx/fx/decompositions.h"
#include "qfx/fx/graph_module.h"

using namespace qfx::fx;

namespace {

int count(const GraphModule& gm, const std::string& target) {
  int k = 0;
  for (const Node* n : gm.graph().nodes()) k += n->op() == Opcode::kCallFunction && n->target() == target;
  return k;
}

// scores [2, 4] + where(keep, 0, fill): transformers' eager mask (fill = float32's
// lowest) and SDPA's decomposition (where(not keep, -inf, 0)).
void expect_mask_rewritten(double fill, bool fill_when_true) {
  auto gm = std::make_shared<GraphModule>();
  Graph& g = gm->graph();
  Node* x = g.placeholder("x");
  Node* c = g.placeholder("c");
  Node* a = g.call_function("aten::scalar_tensor", {Argument(c10::IValue(fill_when_true ? fill : 0.0))}, {}, "a");
  Node* b = g.call_function("aten::scalar_tensor", {Argument(c10::IValue(fill_when_true ? 0.0 : fill))}, {}, "b");
  Node* m = g.call_function("aten::where.self", {Argument(c), Argument(a), Argument(b)}, {}, "mask");
  g.output(Argument(g.call_function("aten::add.Tensor", {Argument(x), Argument(m)}, {}, "scores")));
  const at::Tensor xs = at::randn({2, 4}), cs = at::rand({2, 4}) > 0.5;
  const at::Tensor want = gm->forward({xs, cs}).toTensor();
  EXPECT_EQ(mask_add_as_masked_fill(*gm), 1);
  g.eliminate_dead_code();
  EXPECT_EQ(count(*gm, "aten::add.Tensor"), 0);
  EXPECT_EQ(count(*gm, "aten::masked_fill.Scalar"), 1);
  EXPECT_TRUE(at::equal(gm->forward({xs, cs}).toTensor(), want));
}

}  // namespace

TEST(CoreAtenRewrites, SdpaMinusInfMaskBecomesMaskedFill) {
  expect_mask_rewritten(-std::numeric_limits<double>::infinity(), true);
}

TEST(CoreAtenRewrites, EagerLowestMaskBecomesMaskedFill) {
  expect_mask_rewritten(static_cast<double>(std::numeric_limits<float>::lowest()), false);
}

TEST(CoreAtenRewrites, AddOfAnOrdinaryWhereStays) {
  auto gm = std::make_shared<GraphModule>();
  Graph& g = gm->graph();
  Node* x = g.placeholder("x");
  Node* c = g.placeholder("c");
  Node* m = g.call_function("aten::where.self", {Argument(c), Argument(c10::IValue(1.0)), Argument(c10::IValue(0.0))}, {}, "m");
  g.output(Argument(g.call_function("aten::add.Tensor", {Argument(x), Argument(m)}, {}, "y")));
  EXPECT_EQ(mask_add_as_masked_fill(*gm), 0);
}

TEST(CoreAtenRewrites, BmmByAnExpandedTransposedWeightBecomesLinear) {
  // Core ATen's linear on a 3-D input: bmm(view(expand(x)), view(expand(permute(W)))).
  auto gm = std::make_shared<GraphModule>();
  gm->add_tensor("w", at::randn({5, 3}), /*is_buffer=*/false);
  Graph& g = gm->graph();
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("w", "w");
  Node* wt = g.call_function("aten::permute", {Argument(w), Argument(c10::IValue(std::vector<int64_t>{1, 0}))}, {}, "wt");
  Node* we = g.call_function("aten::expand", {Argument(wt), Argument(c10::IValue(std::vector<int64_t>{2, 3, 5}))}, {}, "we");
  Node* wv = g.call_function("aten::view", {Argument(we), Argument(c10::IValue(std::vector<int64_t>{2, 3, 5}))}, {}, "wv");
  g.output(Argument(g.call_function("aten::bmm", {Argument(x), Argument(wv)}, {}, "y")));
  const at::Tensor xs = at::randn({2, 4, 3});
  const at::Tensor want = gm->forward(xs);
  EXPECT_EQ(addmm_as_linear(*gm), 1);
  g.eliminate_dead_code();
  EXPECT_EQ(count(*gm, "aten::bmm"), 0);
  EXPECT_EQ(count(*gm, "aten::linear"), 1);
  EXPECT_TRUE(at::allclose(gm->forward(xs), want, 1e-5, 1e-6));
}
