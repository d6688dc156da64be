// Int8 kernels under a target's arithmetic (fixed-point or shift requantization,
// narrow accumulators, TFLite-style integer add): the reference kernel against a
// plain re-implementation in the test, and oneDNN against the reference bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "../../backends/src/kernels.h"
#include "int8_test_util.h"
#include "qfx/error.h"
#include "qfx/runtime/op_schema.h"

using namespace qfx::runtime;

namespace {

using test::code_at;
using test::random_codes;

struct TargetCase {
  const char* name;
  Arithmetic a;
  bool pow2;  // power-of-two scales
};

std::vector<TargetCase> targets() {
  Arithmetic tfl;
  tfl.requantize = RequantMode::kFixedPoint;
  tfl.rounding = Rounding::kHalfAwayFromZero;
  Arithmetic q16 = tfl;
  q16.multiplier_bits = 16;
  q16.rounding = Rounding::kHalfUp;
  Arithmetic npu;
  npu.requantize = RequantMode::kShift;
  npu.rounding = Rounding::kHalfUp;
  npu.accumulator_bits = 16;  // small enough that sums saturate in these cases
  Arithmetic wrap = npu;
  wrap.overflow = Overflow::kWrap;
  return {{"fixed_point32", tfl, false}, {"fixed_point16", q16, false}, {"shift_acc16_saturate", npu, true},
          {"shift_acc16_wrap", wrap, true}};
}

}  // namespace

// 3x3 conv, pad 1, per-channel weights: the reference kernel equals int64 sums of
// the test's own loops passed through the primitives; oneDNN takes the node and
// equals the reference.
TEST(Int8Kernels, TargetArithmeticConv) {
  for (const auto& tc : targets()) {
    std::mt19937 rng(21);
    const int64_t N = 2, C = 8, H = 9, W = 7, M = 12;
    for (DType xdt : {DType::kUInt8, DType::kInt8}) {
      Tensor x = random_codes({N, C, H, W}, xdt, xdt == DType::kUInt8 ? 0 : -128, xdt == DType::kUInt8 ? 255 : 127, rng);
      Tensor w = random_codes({M, C, 3, 3}, DType::kInt8, -64, 64, rng);
      Tensor b({M}, DType::kInt32);
      ir::Node n;
      n.op = "QLinearConv";
      n.name = "conv";
      n.inputs = {"x", "w", "b"};
      n.attrs["pads"].ints = {1, 1, 1, 1};
      n.arithmetic = tc.a;
      n.fused_act = "Relu";
      ir::QInfo xq, wq, yq;
      xq.dtype = xdt;
      xq.scale = {tc.pow2 ? 0.03125f : 0.021f};
      xq.zero_point = {xdt == DType::kUInt8 ? 100 : 0};
      wq.dtype = DType::kInt8;
      std::uniform_int_distribution<int> e(7, 10);
      for (int64_t m = 0; m < M; ++m) {
        wq.scale.push_back(tc.pow2 ? std::ldexp(1.0f, -e(rng)) : 0.0011f * static_cast<float>(1 + m % 5));
        wq.zero_point.push_back(0);
        b.data<int32_t>()[m] = static_cast<int32_t>((m - 6) * 700);
      }
      yq.dtype = DType::kInt8;
      yq.scale = {tc.pow2 ? 0.0625f : 0.047f};
      yq.zero_point = {-3};
      n.in_q = {xq, wq};
      n.out_q = yq;
      const std::vector<Meta> metas = {{x.shape(), xdt}, {w.shape(), DType::kInt8}, {b.shape(), DType::kInt32}};
      KernelChoice choice;
      Kernel ref = make_kernel(n, metas, {nullptr, &w, &b}, "reference");
      Kernel dnn = make_kernel(n, metas, {nullptr, &w, &b}, "onednn", false, &choice);
      // Without VNNI oneDNN declines s8 sources (the reference runs them); u8 with |w| <= 64 it takes.
      EXPECT_EQ(dnn.impl == "onednn", onednn_int8_exact(xdt, w))
          << tc.name << ": " << (choice.declined.empty() ? "" : choice.declined[0].reason);
      Tensor yr(ref.outputs[0].shape, DType::kInt8), yd(dnn.outputs[0].shape, DType::kInt8);
      ref.run({&x, &w, &b}, {&yr});
      dnn.run({&x, &w, &b}, {&yd});
      std::vector<float> mult;
      for (int64_t m = 0; m < M; ++m) mult.push_back(xq.scale[0] * wq.scale[m] / yq.scale[0]);
      const Requantizer rq = Requantizer::accumulator(tc.a, mult, "test");
      int64_t saturated = 0;
      for (int64_t nb = 0; nb < N; ++nb)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t oh = 0; oh < H; ++oh)
            for (int64_t ow = 0; ow < W; ++ow) {
              int64_t acc = b.data<int32_t>()[m];
              for (int64_t c = 0; c < C; ++c)
                for (int64_t kh = 0; kh < 3; ++kh)
                  for (int64_t kw = 0; kw < 3; ++kw) {
                    const int64_t ih = oh + kh - 1, iw = ow + kw - 1;
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                    acc += static_cast<int64_t>(code_at(x, ((nb * C + c) * H + ih) * W + iw) - xq.zero_point[0]) *
                           w.data<int8_t>()[((m * C + c) * 3 + kh) * 3 + kw];
                  }
              saturated += acc != limit_accumulator(acc, tc.a.accumulator_bits, Overflow::kSaturate);
              const int64_t i = ((nb * M + m) * H + oh) * W + ow;
              const int32_t want = rq.code(acc, static_cast<size_t>(m), yq.zero_point[0], yq.zero_point[0], 127);
              ASSERT_EQ(code_at(yr, i), want) << tc.name << " at " << i;
              ASSERT_EQ(code_at(yd, i), want) << tc.name << " oneDNN at " << i;
            }
      if (tc.a.accumulator_bits < 32) EXPECT_GT(saturated, 0) << tc.name << ": the case must exercise the narrow accumulator";
    }
  }
}

// int8 Gemm (transB) under each target: oneDNN equals the reference.
// A QGemm "fc" (uint8 x int8 weights, transB, uint8 out) under the case's arithmetic.
ir::Node qgemm_node(const TargetCase& tc) {
  ir::Node n;
  n.op = "QGemm";
  n.name = "fc";
  n.inputs = {"x", "w"};
  n.attrs["transB"].i = 1;
  n.arithmetic = tc.a;
  ir::QInfo xq, wq, yq;
  xq.dtype = yq.dtype = DType::kUInt8;
  wq.dtype = DType::kInt8;
  xq.scale = {tc.pow2 ? 0.015625f : 0.013f};
  wq.scale = {tc.pow2 ? 0.00390625f : 0.0042f};
  yq.scale = {tc.pow2 ? 0.125f : 0.11f};
  xq.zero_point = yq.zero_point = {128};
  wq.zero_point = {0};
  n.in_q = {xq, wq};
  n.out_q = yq;
  return n;
}

TEST(Int8Kernels, TargetArithmeticGemm) {
  for (const auto& tc : targets()) {
    std::mt19937 rng(22);
    const int64_t R = 5, K = 48, M = 10;
    Tensor x = random_codes({R, K}, DType::kUInt8, 0, 255, rng);
    Tensor w = random_codes({M, K}, DType::kInt8, -64, 64, rng);
    const ir::Node n = qgemm_node(tc);
    const std::vector<Meta> metas = {{x.shape(), DType::kUInt8}, {w.shape(), DType::kInt8}};
    Kernel ref = make_kernel(n, metas, {nullptr, &w}, "reference");
    Kernel dnn = make_kernel(n, metas, {nullptr, &w}, "onednn");
    EXPECT_EQ(dnn.impl, "onednn") << tc.name;
    Tensor yr(ref.outputs[0].shape, DType::kUInt8), yd(dnn.outputs[0].shape, DType::kUInt8);
    ref.run({&x, &w}, {&yr});
    dnn.run({&x, &w}, {&yd});
    for (int64_t i = 0; i < yr.numel(); ++i) ASSERT_EQ(code_at(yr, i), code_at(yd, i)) << tc.name << " at " << i;
  }
}

// An empty batch (a plan for zero rows) never reaches oneDNN, whose primitive
// descriptors divide by the dims: the onednn backend declines and the reference runs it.
TEST(Int8Kernels, EmptyBatchRunsOnReference) {
  for (const auto& tc : targets()) {
    std::mt19937 rng(24);
    Tensor x({0, 48}, DType::kUInt8);
    Tensor w = random_codes({10, 48}, DType::kInt8, -64, 64, rng);
    Kernel k = make_kernel(qgemm_node(tc), {{x.shape(), DType::kUInt8}, {w.shape(), DType::kInt8}}, {nullptr, &w}, "onednn");
    EXPECT_NE(k.impl, "onednn") << tc.name;
    ASSERT_EQ(k.outputs[0].shape, (Shape{0, 10})) << tc.name;
    Tensor y(k.outputs[0].shape, DType::kUInt8);
    k.run({&x, &w}, {&y});
  }
}

// oneDNN's s32 output passes through float: beyond 2^24 it declines, naming why.
TEST(Int8Kernels, TargetArithmeticLargeAccumulatorsRunOnReference) {
  std::mt19937 rng(23);
  // u8 sources and |w| <= 64, which oneDNN runs exactly with or without VNNI: the bound alone declines.
  Tensor x = random_codes({1, 512, 4, 4}, DType::kUInt8, 0, 255, rng);
  Tensor w = random_codes({4, 512, 3, 3}, DType::kInt8, -64, 64, rng);
  ir::Node n;
  n.op = "QLinearConv";
  n.name = "wide";
  n.inputs = {"x", "w"};
  n.attrs["pads"].ints = {1, 1, 1, 1};
  n.arithmetic.requantize = RequantMode::kFixedPoint;
  ir::QInfo xq, wq, yq;
  xq.dtype = DType::kUInt8;
  xq.scale = {0.01f};
  xq.zero_point = {128};
  wq.dtype = DType::kInt8;
  wq.scale = {0.001f};
  wq.zero_point = {0};
  yq = xq;
  n.in_q = {xq, wq};
  n.out_q = yq;
  KernelChoice choice;
  Kernel k = make_kernel(n, {{x.shape(), DType::kUInt8}, {w.shape(), DType::kInt8}}, {nullptr, &w}, "onednn", false, &choice);
  EXPECT_EQ(k.impl, "reference");
  bool named = false;
  for (const auto& d : choice.declined) named |= d.reason.find("2^24") != std::string::npos;
  EXPECT_TRUE(named);
}

// QLinearAdd / QLinearMul with fixed-point elementwise arithmetic (TFLite's int8
// add, left shift 20): within one unit of ONNX's float rescale, and not always equal.
TEST(Int8Kernels, TargetArithmeticAddWithinOneUnitOfFloat) {
  std::mt19937 rng(24);
  for (const char* op : {"QLinearAdd", "QLinearMul"}) {
    Tensor a = random_codes({4096}, DType::kInt8, -128, 127, rng), b = random_codes({4096}, DType::kInt8, -128, 127, rng);
    ir::Node n;
    n.op = op;
    n.name = "add";
    n.inputs = {"a", "b"};
    ir::QInfo qa, qb, qy;
    qa.dtype = qb.dtype = qy.dtype = DType::kInt8;
    qa.scale = {0.037f};
    qa.zero_point = {3};
    qb.scale = {0.052f};
    qb.zero_point = {-7};
    qy.scale = {std::string(op) == "QLinearAdd" ? 0.081f : 0.9f};
    qy.zero_point = {1};
    n.in_q = {qa, qb};
    n.out_q = qy;
    const std::vector<Meta> metas = {{a.shape(), DType::kInt8}, {b.shape(), DType::kInt8}};
    Kernel onnx = make_kernel(n, metas, {nullptr, nullptr}, "reference");
    n.arithmetic.elementwise = RequantMode::kFixedPoint;
    n.arithmetic.rounding = Rounding::kHalfAwayFromZero;
    Kernel target = make_kernel(n, metas, {nullptr, nullptr}, "onednn");
    Tensor y0({4096}, DType::kInt8), y1({4096}, DType::kInt8);
    onnx.run({&a, &b}, {&y0});
    target.run({&a, &b}, {&y1});
    int differ = 0;
    for (int64_t i = 0; i < 4096; ++i) {
      ASSERT_LE(std::abs(code_at(y0, i) - code_at(y1, i)), 1) << op << " at " << i;
      differ += code_at(y0, i) != code_at(y1, i);
    }
    EXPECT_LT(differ, 4096 / 20) << op;
  }
}

// arithmetic.lut: DequantizeLinear -> op -> QuantizeLinear becomes one QLut node whose
// 256 outputs equal the three reference kernels run in turn, for every op with a
// table form (the op schemas' table: Sigmoid, HardSwish, Tanh, Elu, Softplus ...).
TEST(Int8Kernels, TargetArithmeticLutEqualsTheUnfusedGroup) {
  ASSERT_GE(lut_op_types().size(), 8u);
  for (const std::string& op : lut_op_types()) {
    ir::Graph g;
    auto scalar = [&](const std::string& name, float v) {
      Tensor t({}, DType::kFloat32);
      t.data<float>()[0] = v;
      g.initializers[name] = t;
    };
    scalar("sx", 0.05f);
    scalar("sy", 1.0f / 128.0f);
    Tensor zx({}, DType::kInt8), zy({}, DType::kInt8);
    zx.data<int8_t>()[0] = 7;
    zy.data<int8_t>()[0] = -20;
    g.initializers["zx"] = zx;
    g.initializers["zy"] = zy;
    g.inputs.push_back({"xq", DType::kInt8, {256}});
    g.outputs.push_back({"yq", DType::kInt8, {256}});
    ir::Node dq, f, q;
    dq.op = "DequantizeLinear"; dq.name = "dq"; dq.inputs = {"xq", "sx", "zx"}; dq.outputs = {"x"};
    f.op = op; f.name = "f"; f.inputs = {"x"}; f.outputs = {"y"};
    q.op = "QuantizeLinear"; q.name = "q"; q.inputs = {"y", "sy", "zy"}; q.outputs = {"yq"};
    g.nodes = {dq, f, q};
    g.arithmetic.lut = {op};
    ir::fuse_qdq(g);
    ASSERT_EQ(g.nodes.size(), 1u) << op;
    ASSERT_EQ(g.nodes[0].op, "QLut") << op;
    Tensor codes({256}, DType::kInt8), lut_out({256}, DType::kInt8);
    for (int i = 0; i < 256; ++i) codes.data<int8_t>()[i] = static_cast<int8_t>(i - 128);
    Kernel k = make_kernel(g.nodes[0], {{{256}, DType::kInt8}}, {nullptr}, "reference");
    k.run({&codes}, {&lut_out});
    // The unfused group on the reference kernels.
    const Tensor &sx = g.initializers["sx"], &sy = g.initializers["sy"];
    Kernel kd = make_kernel(dq, {{{256}, DType::kInt8}, {{}, DType::kFloat32}, {{}, DType::kInt8}}, {nullptr, &sx, &zx}, "reference");
    Kernel kf = make_kernel(f, {{{256}, DType::kFloat32}}, {nullptr}, "reference");
    Kernel kq = make_kernel(q, {{{256}, DType::kFloat32}, {{}, DType::kFloat32}, {{}, DType::kInt8}}, {nullptr, &sy, &zy}, "reference");
    Tensor x({256}, DType::kFloat32), y({256}, DType::kFloat32), yq({256}, DType::kInt8);
    kd.run({&codes, &sx, &zx}, {&x});
    kf.run({&x}, {&y});
    kq.run({&y, &sy, &zy}, {&yq});
    int distinct = 0;
    for (int i = 0; i < 256; ++i) {
      ASSERT_EQ(lut_out.data<int8_t>()[i], yq.data<int8_t>()[i]) << op << " code " << i - 128;
      distinct += i > 0 && yq.data<int8_t>()[i] != yq.data<int8_t>()[i - 1];
    }
    EXPECT_GT(distinct, 20) << op << ": the table must not be degenerate";
  }
}

// Under ONNX's arithmetic a chain of elementwise float ops on one 8-bit value
// (SiLU as x * Sigmoid(x), scaled by a constant) becomes one QLut whose 256 outputs
// equal the unfused group on the reference kernels; a chain that reads a second
// tensor stays float.
TEST(Int8Kernels, ElementwiseChainOnOneValueBecomesOneTable) {
  for (bool second_tensor : {false, true}) {
    ir::Graph g;
    auto scalar = [&](const std::string& name, float v) {
      Tensor t({}, DType::kFloat32);
      t.data<float>()[0] = v;
      g.initializers[name] = t;
    };
    scalar("sx", 0.04f);
    scalar("sy", 0.03f);
    scalar("half", 0.5f);
    Tensor zx({}, DType::kUInt8), zy({}, DType::kUInt8);
    zx.data<uint8_t>()[0] = 140;
    zy.data<uint8_t>()[0] = 20;
    g.initializers["zx"] = zx;
    g.initializers["zy"] = zy;
    g.inputs.push_back({"xq", DType::kUInt8, {256}});
    if (second_tensor) g.inputs.push_back({"other", DType::kFloat32, {256}});
    g.outputs.push_back({"yq", DType::kUInt8, {256}});
    ir::Node dq, sig, mul, scale, q;
    dq.op = "DequantizeLinear"; dq.name = "dq"; dq.inputs = {"xq", "sx", "zx"}; dq.outputs = {"x"};
    sig.op = "Sigmoid"; sig.name = "sig"; sig.inputs = {"x"}; sig.outputs = {"s"};
    mul.op = "Mul"; mul.name = "silu"; mul.inputs = {"x", "s"}; mul.outputs = {"m"};
    scale.op = "Mul"; scale.name = "scale"; scale.inputs = {"m", second_tensor ? "other" : "half"}; scale.outputs = {"y"};
    q.op = "QuantizeLinear"; q.name = "q"; q.inputs = {"y", "sy", "zy"}; q.outputs = {"yq"};
    g.nodes = {dq, sig, mul, scale, q};
    ir::fuse_qdq(g);
    if (second_tensor) {
      EXPECT_GT(g.nodes.size(), 1u) << "a chain reading a second tensor is not a function of one value";
      for (const auto& n : g.nodes) EXPECT_NE(n.op, "QLut");
      continue;
    }
    ASSERT_EQ(g.nodes.size(), 1u);
    ASSERT_EQ(g.nodes[0].op, "QLut");
    Tensor codes({256}, DType::kUInt8), lut_out({256}, DType::kUInt8);
    for (int i = 0; i < 256; ++i) codes.data<uint8_t>()[i] = static_cast<uint8_t>(i);
    Kernel k = make_kernel(g.nodes[0], {{{256}, DType::kUInt8}}, {nullptr}, "reference");
    k.run({&codes}, {&lut_out});
    const Tensor &sx = g.initializers["sx"], &sy = g.initializers["sy"], &half = g.initializers["half"];
    const Meta f256{{256}, DType::kFloat32}, fs{{}, DType::kFloat32};
    Kernel kd = make_kernel(dq, {{{256}, DType::kUInt8}, fs, {{}, DType::kUInt8}}, {nullptr, &sx, &zx}, "reference");
    Kernel ks = make_kernel(sig, {f256}, {nullptr}, "reference");
    Kernel km = make_kernel(mul, {f256, f256}, {nullptr, nullptr}, "reference");
    Kernel kh = make_kernel(scale, {f256, fs}, {nullptr, &half}, "reference");
    Kernel kq = make_kernel(q, {f256, fs, {{}, DType::kUInt8}}, {nullptr, &sy, &zy}, "reference");
    Tensor x({256}, DType::kFloat32), s({256}, DType::kFloat32), m({256}, DType::kFloat32), y({256}, DType::kFloat32),
        yq({256}, DType::kUInt8);
    kd.run({&codes, &sx, &zx}, {&x});
    ks.run({&x}, {&s});
    km.run({&x, &s}, {&m});
    kh.run({&m, &half}, {&y});
    kq.run({&y, &sy, &zy}, {&yq});
    int distinct = 0;
    for (int i = 0; i < 256; ++i) {
      ASSERT_EQ(lut_out.data<uint8_t>()[i], yq.data<uint8_t>()[i]) << "code " << i;
      distinct += i > 0 && yq.data<uint8_t>()[i] != yq.data<uint8_t>()[i - 1];
    }
    EXPECT_GT(distinct, 20) << "the table must not be degenerate";
  }
}

// Data movement commutes with (de)quantization: a DequantizeLinear sinks below the
// Transpose that reads it, and a QuantizeLinear rises above the Flatten that feeds it,
// so the pool between them becomes QLinearGlobalAveragePool and the moves move codes.
TEST(Int8Kernels, QdqMovesPastDataMovement) {
  ir::Graph g;
  Tensor s({}, DType::kFloat32), z({}, DType::kUInt8);
  s.data<float>()[0] = 0.05f;
  z.data<uint8_t>()[0] = 128;
  g.initializers["s"] = s;
  g.initializers["z"] = z;
  g.inputs.push_back({"xq", DType::kUInt8, {1, 4, 3, 3}});
  g.outputs.push_back({"yq", DType::kUInt8, {1, 4}});
  ir::Node dq, tr, gap, fl, q;
  dq.op = "DequantizeLinear"; dq.name = "dq"; dq.inputs = {"xq", "s", "z"}; dq.outputs = {"x"};
  tr.op = "Transpose"; tr.name = "tr"; tr.inputs = {"x"}; tr.outputs = {"t"};
  tr.attrs["perm"].kind = ir::Attr::Kind::kInts;
  tr.attrs["perm"].ints = {0, 1, 3, 2};
  gap.op = "GlobalAveragePool"; gap.name = "gap"; gap.inputs = {"t"}; gap.outputs = {"p"};
  fl.op = "Flatten"; fl.name = "fl"; fl.inputs = {"p"}; fl.outputs = {"f"};
  q.op = "QuantizeLinear"; q.name = "q"; q.inputs = {"f", "s", "z"}; q.outputs = {"yq"};
  g.nodes = {dq, tr, gap, fl, q};
  ir::fuse_qdq(g);
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"Transpose", "QLinearGlobalAveragePool", "Flatten"}));
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].inputs[0], "xq");
  EXPECT_EQ(g.nodes[2].outputs[0], "yq");
}

// arithmetic.softmax: fixed_point: DequantizeLinear -> Softmax -> QuantizeLinear with
// TFLite's output qparams becomes QLinearSoftmax. At the ends of the ranges (equal
// codes, one code 255 steps above the rest, a single element, input scales from
// 1e-4 to 1, int8 and uint8) it is within one code of the exact softmax, and exact
// where TFLite's kernel must be: the row maximum alone gives 1 (the top code), codes
// beyond diff_min give 0. LiteRT's reference kernel is the bit-exact check
// (tests/cli/tflite_test.sh). Other output qparams stay float; rows beyond TFLite's
// Q12 sum are an error.
TEST(Int8Kernels, TargetArithmeticSoftmaxFixedPoint) {
  auto group = [](float sx, DType t, float sy, int32_t zy, int64_t len) {
    ir::Graph g;
    auto scalar = [&](const std::string& name, float v) {
      Tensor s({}, DType::kFloat32);
      s.data<float>()[0] = v;
      g.initializers[name] = s;
    };
    scalar("sx", sx);
    scalar("sy", sy);
    Tensor zx({}, t), z({}, t);
    if (t == DType::kInt8) z.data<int8_t>()[0] = static_cast<int8_t>(zy);
    else z.data<uint8_t>()[0] = static_cast<uint8_t>(zy);
    g.initializers["zx"] = zx;
    g.initializers["zy"] = z;
    g.inputs.push_back({"xq", t, {3, len}});
    g.outputs.push_back({"yq", t, {3, len}});
    ir::Node dq, f, q;
    dq.op = "DequantizeLinear"; dq.name = "dq"; dq.inputs = {"xq", "sx", "zx"}; dq.outputs = {"x"};
    f.op = "Softmax"; f.name = "f"; f.inputs = {"x"}; f.outputs = {"y"};
    q.op = "QuantizeLinear"; q.name = "q"; q.inputs = {"y", "sy", "zy"}; q.outputs = {"yq"};
    g.nodes = {dq, f, q};
    g.arithmetic.softmax_fixed_point = true;
    ir::fuse_qdq(g);
    return g;
  };
  for (DType t : {DType::kInt8, DType::kUInt8}) {
    const int lo = t == DType::kInt8 ? -128 : 0;
    for (float sx : {1e-4f, 0.02f, 0.1f, 1.0f})
      for (int64_t len : {1, 2, 7, 64}) {
        ir::Graph g = group(sx, t, 1.0f / 256, lo, len);
        ASSERT_EQ(g.nodes.size(), 1u);
        ASSERT_EQ(g.nodes[0].op, "QLinearSoftmax");
        // Row 0: equal codes; row 1: one code 255 above the rest; row 2: a ramp.
        Tensor x({3, len}, t), y({3, len}, t);
        for (int64_t j = 0; j < len; ++j) {
          const int32_t v[3] = {lo + 100, j == len / 2 ? lo + 255 : lo, lo + static_cast<int32_t>((j * 37) % 256)};
          for (int r = 0; r < 3; ++r) {
            if (t == DType::kInt8) x.data<int8_t>()[r * len + j] = static_cast<int8_t>(v[r]);
            else x.data<uint8_t>()[r * len + j] = static_cast<uint8_t>(v[r]);
          }
        }
        Kernel k = make_kernel(g.nodes[0], {{{3, len}, t}}, {nullptr}, "reference");
        k.run({&x}, {&y});
        for (int r = 0; r < 3; ++r) {
          double m = -1e30, sum = 0;
          for (int64_t j = 0; j < len; ++j) m = std::max(m, double(code_at(x, r * len + j)));
          for (int64_t j = 0; j < len; ++j) sum += std::exp(double(sx) * (code_at(x, r * len + j) - m));
          for (int64_t j = 0; j < len; ++j) {
            const double p = std::exp(double(sx) * (code_at(x, r * len + j) - m)) / sum;
            const int32_t want = std::clamp(static_cast<int32_t>(std::lround(p * 256)) + lo, lo, lo + 255);
            const int32_t got = code_at(y, r * len + j);
            EXPECT_LE(std::abs(got - want), 1) << "scale " << sx << " len " << len << " row " << r << " j " << j;
            if (len == 1) EXPECT_EQ(got, lo + 255) << "a single element is 1: the top code";
            if (r == 1 && sx == 1.0f && len > 1) EXPECT_EQ(got, j == len / 2 ? lo + 255 : lo) << "exp(-255) is below diff_min: 0";
          }
        }
      }
  }
  EXPECT_EQ(group(0.1f, DType::kInt8, 1.0f / 128, 0, 8).nodes[1].op, "Softmax") << "other output qparams stay float";
  ir::Graph wide = group(0.1f, DType::kInt8, 1.0f / 256, -128, 4096);
  EXPECT_THROW(make_kernel(wide.nodes[0], {{{3, 4096}, DType::kInt8}}, {nullptr}, "reference"), qfx::UnsupportedOpError);
}
