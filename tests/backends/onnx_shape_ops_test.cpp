// The reference kernels of ONNX reductions, scans, index ops, value-shaped ops,
// LayerNormalization and Pad, each against values worked out by hand from the ONNX
// operator spec: empty and negative axes, keepdims 0 / 1, int64 ends, ties, and the
// errors for what the kernels do not run.
#include <cmath>

#include "op_test_util.h"

namespace qfx::runtime {
namespace {
using namespace test;

TEST(OnnxShapeOps, ReduceMaxMinProdOverAttributeAndInputAxes) {
  const Tensor x = f32({2, 3}, {1, -5, 3, 4, 2, -6});
  ir::Node mx = op_node("ReduceMax", 1);
  set_ints(mx, "axes", {-1});
  set_i(mx, "keepdims", 0);
  Tensor y = run_op(mx, {x})[0];
  EXPECT_EQ(y.shape(), (Shape{2}));
  EXPECT_EQ(values(y), (V{3, 4}));
  ir::Node mn = op_node("ReduceMin", 2);  // opset 18: axes as input 1, keepdims 1
  y = run_op(mn, {x, i64({1}, {0})}, {1})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 3}));
  EXPECT_EQ(values(y), (V{1, -5, -6}));
  EXPECT_EQ(values(run_op(op_node("ReduceProd", 1), {x})[0]), (V{720}));  // empty axes: every axis
  ir::Node noop = op_node("ReduceMax", 1);
  set_i(noop, "noop_with_empty_axes", 1);
  EXPECT_EQ(values(run_op(noop, {x})[0]), values(x));
  const Tensor big = i64v({2, 2}, {kMax, kMin, 0, -1});
  EXPECT_EQ(run_op(op_node("ReduceMax", 1), {big})[0].data<int64_t>()[0], kMax);
  EXPECT_EQ(run_op(op_node("ReduceMin", 1), {big})[0].data<int64_t>()[0], kMin);
  EXPECT_EQ(values(run_op(mx, {boolean({2, 2}, {0, 1, 0, 0})})[0]), (V{1, 0}));  // bool max: any
  EXPECT_TRUE(std::isnan(at(run_op(mx, {f32({1, 3}, {1, NAN, 2})})[0], 0)));
  EXPECT_EQ(values(run_op(op_node("ReduceMax", 1), {f32({0, 2}, {})})[0]), (V{-INFINITY}));  // empty: the identity
  ir::Node mean = op_node("ReduceMean", 1);
  set_i(mean, "noop_with_empty_axes", 1);
  EXPECT_EQ(values(run_op(mean, {x})[0]), values(x));
  EXPECT_NE(error_of<UnsupportedOpError>([&] { run_op(mn, {x, i64({1}, {0})}); }).find("known when the model is planned"),
            std::string::npos);
}

TEST(OnnxShapeOps, ArgMaxArgMinTiesNanAndKeepdims) {
  const Tensor x = f32({2, 4}, {1, 7, 7, 0, -2, -2, 5, -2});
  ir::Node am = op_node("ArgMax", 1);
  set_i(am, "axis", -1);
  Tensor y = run_op(am, {x})[0];
  EXPECT_EQ(y.dtype(), DType::kInt64);
  EXPECT_EQ(y.shape(), (Shape{2, 1}));
  EXPECT_EQ(values(y), (V{1, 2}));  // first of the tied 7s
  set_i(am, "select_last_index", 1);
  EXPECT_EQ(values(run_op(am, {x})[0]), (V{2, 2}));
  ir::Node an = op_node("ArgMin", 1);
  set_i(an, "keepdims", 0);
  y = run_op(an, {x})[0];  // axis 0
  EXPECT_EQ(y.shape(), (Shape{4}));
  EXPECT_EQ(values(y), (V{1, 1, 1, 1}));
  set_i(an, "axis", 1);
  set_i(an, "select_last_index", 1);
  EXPECT_EQ(values(run_op(an, {x})[0]), (V{3, 3}));
  EXPECT_EQ(values(run_op(am, {i64v({1, 3}, {kMin, kMax, kMax - 1})})[0]), (V{1}));
  EXPECT_EQ(values(run_op(op_node("ArgMax", 1), {f32({3}, {1, NAN, 5})})[0]), (V{1}));  // NaN is the extreme (numpy)
}

TEST(OnnxShapeOps, CumSumExclusiveReverseAndAComputedAxis) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  ir::Node n = op_node("CumSum", 2);
  EXPECT_EQ(values(run_op(n, {x, i64({}, {1})}, {1})[0]), (V{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(values(run_op(n, {x, i32({1}, {0})})[0]), (V{1, 2, 3, 5, 7, 9}));  // axis computed: read when it runs
  set_i(n, "exclusive", 1);
  set_i(n, "reverse", 1);
  EXPECT_EQ(values(run_op(n, {x, i64({}, {-1})})[0]), (V{5, 3, 0, 11, 6, 0}));
  const Tensor s = run_op(op_node("CumSum", 2), {i64v({3}, {kMax - 1, 1, 1}), i64({}, {0})})[0];
  EXPECT_EQ(s.data<int64_t>()[1], kMax);
  EXPECT_EQ(s.data<int64_t>()[2], kMin);  // wraps
  EXPECT_NE(error_of<DataError>([&] { run_op(n, {x, i64({}, {2})}); }).find("axis 2 out of range"), std::string::npos);
}

TEST(OnnxShapeOps, TopKOrdersTiesByIndexAndNeedsAKnownK) {
  const Tensor x = f32({2, 5}, {3, 1, 3, 9, 0, 2, 2, 2, -1, 7});
  ir::Node n = op_node("TopK", 2, 2);
  auto out = run_op(n, {x, i64({1}, {3})}, {1});
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values(out[0]), (V{9, 3, 3, 7, 2, 2}));
  EXPECT_EQ(values(out[1]), (V{3, 0, 2, 4, 0, 1}));
  set_i(n, "largest", 0);
  set_i(n, "axis", 0);
  out = run_op(n, {x, i64({1}, {1})}, {1});
  EXPECT_EQ(values(out[0]), (V{2, 1, 2, -1, 0}));
  EXPECT_EQ(values(out[1]), (V{1, 0, 1, 1, 0}));
  out = run_op(op_node("TopK", 2, 2), {f32({4}, {1, NAN, 5, 2}), i64({1}, {2})}, {1});
  EXPECT_TRUE(std::isnan(at(out[0], 0)));  // NaN above every number (PyTorch)
  EXPECT_EQ(values(out[1]), (V{1, 2}));
  EXPECT_EQ(values(run_op(op_node("TopK", 2, 2), {i64v({3}, {kMin, kMax, 0}), i64({1}, {1})}, {1})[0]), (V{static_cast<double>(kMax)}));
  EXPECT_NE(error_of<UnsupportedOpError>([&] { run_op(op_node("TopK", 2, 2), {x, i64({1}, {1})}); }).find("K must be known"),
            std::string::npos);
  EXPECT_NE(error_of<DataError>([&] { run_op(op_node("TopK", 2, 2), {x, i64({1}, {6})}, {1}); }).find("K 6 outside 0..5"),
            std::string::npos);
}

TEST(OnnxShapeOps, GatherElementsAndGatherND) {
  const Tensor data = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  ir::Node ge = op_node("GatherElements", 2);
  set_i(ge, "axis", 1);
  EXPECT_EQ(values(run_op(ge, {data, i64({2, 2}, {0, -1, 2, 1})})[0]), (V{1, 3, 6, 5}));
  set_i(ge, "axis", 0);
  EXPECT_EQ(values(run_op(ge, {f32({2, 2}, {1, 2, 3, 4}), i32({1, 2}, {1, 0})})[0]), (V{3, 2}));
  EXPECT_NE(error_of<DataError>([&] { run_op(ge, {data, i64({1, 1}, {2})}); }).find("index 2 out of range"), std::string::npos);
  ir::Node gn = op_node("GatherND", 2);
  Tensor y = run_op(gn, {data, i64({2, 1}, {1, 0})})[0];  // rows
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(y), (V{4, 5, 6, 1, 2, 3}));
  EXPECT_EQ(values(run_op(gn, {data, i64({2, 2}, {0, 2, 1, -3})})[0]), (V{3, 4}));  // elements
  set_i(gn, "batch_dims", 1);
  EXPECT_NE(error_of<UnsupportedOpError>([&] { run_op(gn, {data, i64({2, 1}, {0, 1})}); }).find("batch_dims 0 only"), std::string::npos);
}

TEST(OnnxShapeOps, ScatterNDAndScatterElementsReplaceOrAdd) {
  const Tensor data = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  ir::Node sn = op_node("ScatterND", 3);
  EXPECT_EQ(values(run_op(sn, {data, i64({1, 1}, {2}), f32({1, 2}, {-1, -2})})[0]), (V{1, 2, 3, 4, -1, -2}));
  set_s(sn, "reduction", "add");
  EXPECT_EQ(values(run_op(sn, {data, i64({2, 2}, {0, 1, 0, 1}), f32({2}, {10, 20})})[0]), (V{1, 32, 3, 4, 5, 6}));
  set_s(sn, "reduction", "mul");
  EXPECT_NE(error_of<UnsupportedOpError>([&] { run_op(sn, {data, i64({1, 1}, {0}), f32({1, 2}, {1, 1})}); }).find("reduction 'mul'"),
            std::string::npos);
  ir::Node se = op_node("ScatterElements", 3);
  set_i(se, "axis", 1);
  EXPECT_EQ(values(run_op(se, {i64({2, 3}, {0, 0, 0, 0, 0, 0}), i64({2, 1}, {2, -3}), i64({2, 1}, {7, 8})})[0]), (V{0, 0, 7, 8, 0, 0}));
  set_s(se, "reduction", "add");
  set_i(se, "axis", 0);
  EXPECT_EQ(values(run_op(se, {data, i64({2, 1}, {1, 1}), f32({2, 1}, {0.5, 0.25})})[0]), (V{1, 2, 3.75, 4, 5, 6}));
}

TEST(OnnxShapeOps, RangeConstantOfShapeTileAndSplit) {
  Tensor y = run_op(op_node("Range", 3), {f32({}, {1}), f32({}, {2}), f32({}, {0.25})}, {0, 1, 2})[0];
  EXPECT_EQ(values(y), (V{1, 1.25, 1.5, 1.75}));
  y = run_op(op_node("Range", 3), {i64({}, {10}), i64({}, {3}), i64({}, {-3})}, {0, 1, 2})[0];
  EXPECT_EQ(values(y), (V{10, 7, 4}));
  EXPECT_EQ(run_op(op_node("Range", 3), {i32({}, {5}), i32({}, {1}), i32({}, {1})}, {0, 1, 2})[0].shape(), (Shape{0}));
  EXPECT_NE(error_of<UnsupportedOpError>([] { run_op(op_node("Range", 3), {i64({}, {0}), i64({}, {4}), i64({}, {1})}, {1, 2}); })
                .find("start must be known when the model is planned"),
            std::string::npos);
  ir::Node cs = op_node("ConstantOfShape", 1);
  y = run_op(cs, {i64({2}, {2, 1})}, {0})[0];
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  EXPECT_EQ(values(y), (V{0, 0}));
  cs.attrs["value"].kind = ir::Attr::Kind::kTensor;
  cs.attrs["value"].t = i64({1}, {-4});
  EXPECT_EQ(values(run_op(cs, {i64({1}, {3})}, {0})[0]), (V{-4, -4, -4}));
  y = run_op(op_node("Tile", 2), {i32({2, 2}, {1, 2, 3, 4}), i64({2}, {1, 2})}, {1})[0];
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
  EXPECT_EQ(values(y), (V{1, 2, 1, 2, 3, 4, 3, 4}));
  const Tensor x = f32({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  ir::Node sp = op_node("Split", 2, 2);
  set_i(sp, "axis", -1);
  auto parts = run_op(sp, {x, i64({2}, {1, 4})}, {1});
  EXPECT_EQ(values(parts[0]), (V{0, 5}));
  EXPECT_EQ(values(parts[1]), (V{1, 2, 3, 4, 6, 7, 8, 9}));
  ir::Node sn = op_node("Split", 1, 3);
  set_i(sn, "axis", 1);
  set_i(sn, "num_outputs", 3);  // opset 18: ceil(5 / 3) = 2, 2, then 1
  parts = run_op(sn, {x});
  EXPECT_EQ(parts[2].shape(), (Shape{2, 1}));
  EXPECT_EQ(values(parts[1]), (V{2, 3, 7, 8}));
  EXPECT_EQ(values(run_op(op_node("Split", 1, 2), {x})[1]), (V{5, 6, 7, 8, 9}));  // equal parts along axis 0
}

TEST(OnnxShapeOps, LayerNormalizationMatchesTheFormulaInDouble) {
  const Tensor x = f32({2, 2, 3}, {1, 2, 3, 4, 5, 7, -1, 0, 1, 10, 20, 40});
  const Tensor scale = f32({3}, {1, 2, 0.5}), bias = f32({1}, {0.25});
  ir::Node n = op_node("LayerNormalization", 3, 3);
  set_f(n, "epsilon", 1e-3f);
  auto out = run_op(n, {x, scale, bias});
  for (int64_t r = 0; r < 4; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < 3; ++c) mean += at(x, r * 3 + c) / 3;
    for (int c = 0; c < 3; ++c) var += (at(x, r * 3 + c) - mean) * (at(x, r * 3 + c) - mean) / 3;
    EXPECT_NEAR(at(out[1], r), mean, 1e-5);
    EXPECT_NEAR(at(out[2], r), 1 / std::sqrt(var + 1e-3), 1e-5);
    for (int c = 0; c < 3; ++c)
      EXPECT_NEAR(at(out[0], r * 3 + c), (at(x, r * 3 + c) - mean) / std::sqrt(var + 1e-3) * at(scale, c) + 0.25, 1e-5);
  }
  EXPECT_EQ(out[1].shape(), (Shape{2, 2, 1}));
  ir::Node two = op_node("LayerNormalization", 2);  // axis -2: over the last two dims, no bias
  set_i(two, "axis", -2);
  const Tensor y = run_op(two, {x, f32({1}, {1})})[0];
  double s = 0;
  for (int j = 0; j < 6; ++j) s += at(y, j);
  EXPECT_NEAR(s, 0, 1e-5);
  EXPECT_NE(error_of<DataError>([&] { run_op(n, {x, f32({2, 3}, {1, 1, 1, 1, 1, 1}), bias}); }).find("does not broadcast"), std::string::npos);
}

TEST(OnnxShapeOps, PadReflectEdgeConstantAxesAndCrop) {
  const Tensor x = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  ir::Node n = op_node("Pad", 2);
  set_s(n, "mode", "reflect");
  EXPECT_EQ(values(run_op(n, {x, i64({4}, {0, 2, 0, 1})}, {1})[0]), (V{3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}));
  set_s(n, "mode", "edge");
  EXPECT_EQ(values(run_op(n, {x, i64({4}, {1, 0, 0, 1})}, {1})[0]), (V{1, 2, 3, 3, 1, 2, 3, 3, 4, 5, 6, 6}));
  ir::Node c = op_node("Pad", 4);  // opset 18: pads for the axes input only, a constant value
  EXPECT_EQ(values(run_op(c, {x, i64({2}, {1, -1}), i64({}, {-7}), i64({1}, {-1})}, {1, 3})[0]), (V{-7, 1, 2, -7, 4, 5}));
  EXPECT_EQ(values(run_op(op_node("Pad", 2), {f32({1, 2}, {1, 2}), i64({4}, {0, 1, 0, 0})}, {1})[0]), (V{0, 1, 2}));
  set_s(n, "mode", "reflect");
  EXPECT_NE(error_of<UnsupportedOpError>([&] { run_op(n, {x, i64({4}, {0, 3, 0, 0})}, {1}); }).find("pads must be below the dim"),
            std::string::npos);
  set_s(n, "mode", "wrap");
  EXPECT_NE(error_of<UnsupportedOpError>([&] { run_op(n, {x, i64({4}, {0, 1, 0, 0})}, {1}); }).find("Pad mode 'wrap'"), std::string::npos);
}

}  // namespace
}  // namespace qfx::runtime
