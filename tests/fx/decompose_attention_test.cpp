// decompose_attention: aten::scaled_dot_product_attention rewritten into matmul /
// softmax / matmul computes what libtorch's own scaled_dot_product_attention does,
// for every mask kind, and refuses clearly what it cannot decompose.
#include <gtest/gtest.h>
#include <ATen/ATen.h>

#include "qfx/error.h"
#include "qfx/fx/decompositions.h"
#include "qfx/fx/graph_module.h"

using namespace qfx::fx;

namespace {

struct Case {
  bool shapes = true;           // q, k carry meta["traced_shape"]
  std::string mask;             // "", "Float", "Bool"
  bool mask_dtype_known = true;
  bool causal = false;
  double scale = 0.0;           // 0: default
};

// A graph with one SDPA node over q [2, 3, 5, 8], k [2, 3, 7, 8], v [2, 3, 7, 6]
// (mask [5, 7]); returns it with its inputs and libtorch's own result.
struct Built {
  std::shared_ptr<GraphModule> gm;
  std::vector<c10::IValue> inputs;
  at::Tensor expected;
};

Built build(const Case& c) {
  at::manual_seed(0);
  const int64_t l = 5, s = c.causal ? 5 : 7;
  at::Tensor q = at::randn({2, 3, l, 8}), k = at::randn({2, 3, s, 8}), v = at::randn({2, 3, s, 6});
  Built b;
  b.gm = std::make_shared<GraphModule>();
  Graph& g = b.gm->graph();
  Node* qn = g.placeholder("q");
  Node* kn = g.placeholder("k");
  Node* vn = g.placeholder("v");
  if (c.shapes) {
    qn->meta()["traced_shape"] = c10::IValue(std::vector<int64_t>{-1, 3, l, 8});
    kn->meta()["traced_shape"] = c10::IValue(std::vector<int64_t>{-1, 3, s, 8});
  }
  b.inputs = {q, k, v};
  c10::optional<at::Tensor> mask;
  Argument mask_arg;
  if (!c.mask.empty()) {
    Node* mn = g.placeholder("mask");
    if (c.mask_dtype_known) mn->meta()["traced_dtype"] = c.mask;
    at::Tensor m = c.mask == "Bool" ? at::rand({l, s}) > 0.3 : at::randn({l, s});
    if (c.mask == "Bool") m.select(1, 0).fill_(true);  // every query sees a key: no NaN rows
    mask = m;
    mask_arg = Argument(mn);
    b.inputs.push_back(m);
  }
  const c10::IValue scale = c.scale > 0 ? c10::IValue(c.scale) : c10::IValue();
  Node* a = g.call_function("aten::scaled_dot_product_attention",
                            {qn, kn, vn, mask_arg, c10::IValue(0.0), c10::IValue(c.causal)}, {{"scale", Argument(scale)}});
  g.output(a);
  b.expected = at::scaled_dot_product_attention(q, k, v, mask, 0.0, c.causal,
                                                c.scale > 0 ? c10::optional<double>(c.scale) : c10::nullopt);
  return b;
}

int count(const Graph& g, const std::string& target) {
  int n = 0;
  for (const Node* x : g.nodes()) n += x->target() == target;
  return n;
}

void expect_same_as_libtorch(const Case& c) {
  Built b = build(c);
  const at::Tensor before = b.gm->forward(b.inputs).toTensor();
  ASSERT_TRUE(at::allclose(before, b.expected, 0, 0));  // the undecomposed node runs libtorch's op
  ASSERT_EQ(decompose_attention(*b.gm), 1);
  b.gm->graph().lint();
  EXPECT_EQ(count(b.gm->graph(), "aten::scaled_dot_product_attention"), 0);
  EXPECT_EQ(count(b.gm->graph(), "aten::matmul"), 2);
  EXPECT_EQ(count(b.gm->graph(), "aten::softmax.int"), 1);
  const at::Tensor after = b.gm->forward(b.inputs).toTensor();
  ASSERT_EQ(after.sizes(), b.expected.sizes());
  EXPECT_LE((after - b.expected).abs().max().item<float>(), 1e-5f * b.expected.abs().max().item<float>());
}

}  // namespace

TEST(DecomposeAttention, NoMaskDefaultScale) { expect_same_as_libtorch({}); }

TEST(DecomposeAttention, FloatMaskIsAdded) {
  Case c;
  c.mask = "Float";
  expect_same_as_libtorch(c);
}

TEST(DecomposeAttention, BoolMaskKeepsTheTruePositions) {
  Case c;
  c.mask = "Bool";
  expect_same_as_libtorch(c);
}

TEST(DecomposeAttention, CausalMaskBecomesABuffer) {
  Case c;
  c.causal = true;
  expect_same_as_libtorch(c);
}

TEST(DecomposeAttention, ExplicitScaleNeedsNoShapes) {
  Case c;
  c.shapes = false;
  c.scale = 0.3;
  expect_same_as_libtorch(c);
}

TEST(DecomposeAttention, DefaultScaleWithoutShapesNamesTheNode) {
  Case c;
  c.shapes = false;
  Built b = build(c);
  try {
    decompose_attention(*b.gm);
    FAIL() << "expected UnsupportedOpError";
  } catch (const qfx::UnsupportedOpError& e) {
    EXPECT_NE(std::string(e.what()).find("scaled_dot_product_attention"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("last dimension E"), std::string::npos) << e.what();
  }
}

TEST(DecomposeAttention, MaskOfUnknownDtypeIsRefused) {
  Case c;
  c.mask = "Bool";
  c.mask_dtype_known = false;
  Built b = build(c);
  EXPECT_THROW(decompose_attention(*b.gm), qfx::UnsupportedOpError);
}
