// oneDNN int8 kernels against the reference integer arithmetic, op by op, on
// random data over many configurations (kernel-level: errors do not compound).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <random>

#include "../../backends/src/kernels.h"
#include "int8_test_util.h"
#include "qfx/error.h"

using namespace qfx::runtime;

namespace {

struct ConvCase {
  int64_t N, C, H, W, M, k, stride, pad, group;
  DType xdt, ydt;
  std::string act;
  bool seven_bit_weights;
};

// Runs `n` on both backends; returns (max difference in units, fraction equal).
std::pair<int, double> compare(const ir::Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts,
                               const std::vector<const Tensor*>& inputs, bool* onednn_used) {
  Kernel ref = make_kernel(n, in, consts, "reference");
  Kernel dnn = make_kernel(n, in, consts, "onednn");
  *onednn_used = dnn.impl == "onednn";
  Tensor a(ref.outputs[0].shape, ref.outputs[0].dtype), b(dnn.outputs[0].shape, dnn.outputs[0].dtype);
  ref.run(inputs, {&a});
  dnn.run(inputs, {&b});
  int worst = 0;
  int64_t equal = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const int d = std::abs(test::code_at(a, i) - test::code_at(b, i));
    worst = std::max(worst, d);
    equal += d == 0;
  }
  return {worst, static_cast<double>(equal) / static_cast<double>(a.numel())};
}

}  // namespace

TEST(Int8Kernels, OneDnnConvEqualsReference) {
  std::mt19937 rng(5);
  const ConvCase cases[] = {
      {2, 8, 12, 12, 16, 3, 1, 1, 1, DType::kUInt8, DType::kUInt8, "", true},
      {2, 8, 12, 12, 16, 3, 1, 1, 1, DType::kUInt8, DType::kUInt8, "", false},
      {1, 16, 10, 10, 16, 3, 2, 1, 16, DType::kUInt8, DType::kUInt8, "Relu", true},  // depthwise, strided
      {2, 6, 9, 7, 4, 1, 1, 0, 1, DType::kInt8, DType::kInt8, "", false},
      {1, 8, 8, 8, 8, 3, 1, 1, 2, DType::kInt8, DType::kUInt8, "Clip", true},     // grouped
      {1, 32, 14, 14, 64, 3, 1, 1, 1, DType::kUInt8, DType::kInt8, "Relu", true},
  };
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const auto& c : cases) {
    ir::Node n = test::conv_node("QLinearConv", "qconv", c.group, c.stride, c.pad);
    Tensor x = test::random_codes({c.N, c.C, c.H, c.W}, c.xdt, rng);
    Tensor w = test::random_codes({c.M, c.C / c.group, c.k, c.k}, DType::kInt8, rng);
    if (c.seven_bit_weights)
      for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(w.data<int8_t>()[i] / 2);
    Tensor b({c.M}, DType::kInt32);
    ir::QInfo xq, wq, yq;
    xq.dtype = c.xdt;
    xq.scale = {0.02f};
    xq.zero_point = {c.xdt == DType::kUInt8 ? 128 : 3};
    wq.dtype = DType::kInt8;
    for (int64_t m = 0; m < c.M; ++m) {
      wq.scale.push_back(0.001f * (1.0f + std::abs(nd(rng))));
      wq.zero_point.push_back(0);
      b.data<int32_t>()[m] = static_cast<int32_t>(nd(rng) * 2000);
    }
    yq.dtype = c.ydt;
    yq.scale = {0.05f};
    yq.zero_point = {c.ydt == DType::kUInt8 ? 60 : -5};
    n.in_q = {xq, wq};
    n.out_q = yq;
    n.fused_act = c.act;
    n.clip_lo = 0.0f;
    n.clip_hi = 3.0f;
    bool used = false;
    auto r = compare(n, {{x.shape(), x.dtype()}, {w.shape(), w.dtype()}, {b.shape(), b.dtype()}}, {nullptr, &w, &b},
                     {&x, &w, &b}, &used);
    // Without VNNI, oneDNN runs only what it computes exactly: u8 sources with
    // weights in [-64, 64]; the rest goes to the reference kernels.
    const bool exact = onednn_int8_exact(c.xdt, w);
    EXPECT_EQ(used, exact) << "case M=" << c.M << " group=" << c.group;
    if (c.xdt == DType::kUInt8 && c.seven_bit_weights) EXPECT_TRUE(used) << "oneDNN must take u8 x 7-bit weights";
    // Bit for bit: the oneDNN kernel rounds in a post-op before its zero point is
    // added, as ONNX QuantizeLinear and the reference do.
    EXPECT_EQ(r.first, 0) << "case M=" << c.M << " group=" << c.group;
    EXPECT_EQ(r.second, 1.0) << "case M=" << c.M << " group=" << c.group;
  }
}

// The int32 bias at the ends of its range (+-2^31, and 100 inside), inputs and
// weights at both ends, zero points at both ends: the accumulator wraps in int32 as
// ONNX Runtime's QLinearConv / QGemm add the bias (checked in ONNX Runtime 1.31:
// x 255, w 127, bias 2^31-1, output scale 2^24, zero point 128 gives code 0, where a
// saturating sum would give 255). Every backend's kernel equals the int32 wraparound.
TEST(Int8Kernels, Int32BiasAtTheEndsWrapsAsOnnxRuntime) {
  const int32_t biases[] = {INT32_MAX, INT32_MIN, INT32_MAX - 100, INT32_MIN + 100, 0};
  struct Act {
    DType dt;
    int32_t lo, hi, zx, zy;
  };
  const Act acts[] = {{DType::kUInt8, 0, 255, 0, 128}, {DType::kUInt8, 0, 255, 255, 0}, {DType::kInt8, -128, 127, -128, 127},
                      {DType::kInt8, -128, 127, 127, -128}};
  const float ys = 16777216.0f;  // 2^24: sums near +-2^31 land inside the code range
  int64_t wrapped = 0;
  for (const char* op : {"QLinearConv", "QGemm"})
    for (const Act& a : acts)
      for (const std::vector<int> ws : {std::vector<int>{-128, 127, 0}, std::vector<int>{-64, 64, 0}}) {
        const int64_t M = static_cast<int64_t>(std::size(biases) * ws.size());
        const bool conv = std::string(op) == "QLinearConv";
        ir::Node n = conv ? test::conv_node(op, "q", 1, 1, 0) : ir::Node{};
        if (!conv) {
          n.op = op;
          n.name = "q";
          n.inputs = {"x", "w", "b"};
          n.attrs["transB"].i = 1;
        }
        Tensor x(conv ? Shape{3, 1, 1, 1} : Shape{3, 1}, a.dt), w(conv ? Shape{M, 1, 1, 1} : Shape{M, 1}, DType::kInt8),
            b({M}, DType::kInt32);
        const int32_t xs[] = {a.lo, a.hi, a.zx};
        for (int i = 0; i < 3; ++i) {
          if (a.dt == DType::kUInt8) x.data<uint8_t>()[i] = static_cast<uint8_t>(xs[i]);
          else x.data<int8_t>()[i] = static_cast<int8_t>(xs[i]);
        }
        for (int64_t m = 0; m < M; ++m) {
          b.data<int32_t>()[m] = biases[static_cast<size_t>(m) / ws.size()];
          w.data<int8_t>()[m] = static_cast<int8_t>(ws[static_cast<size_t>(m) % ws.size()]);
        }
        ir::QInfo xq, wq, yq;
        xq.dtype = a.dt;
        xq.scale = {1.0f};
        xq.zero_point = {a.zx};
        wq.dtype = DType::kInt8;
        wq.scale.assign(static_cast<size_t>(M), 1.0f);
        wq.zero_point.assign(static_cast<size_t>(M), 0);
        yq.dtype = a.dt;
        yq.scale = {ys};
        yq.zero_point = {a.zy};
        n.in_q = {xq, wq};
        n.out_q = yq;
        const std::vector<Meta> in = {{x.shape(), x.dtype()}, {w.shape(), w.dtype()}, {b.shape(), b.dtype()}};
        for (const char* backend : {"reference", "onednn"}) {
          Kernel k = make_kernel(n, in, {nullptr, &w, &b}, backend);
          Tensor y(k.outputs[0].shape, k.outputs[0].dtype);
          k.run({&x, &w, &b}, {&y});
          for (int64_t r = 0; r < 3; ++r)
            for (int64_t m = 0; m < M; ++m) {
              const int64_t acc = int64_t{xs[r] - a.zx} * w.data<int8_t>()[m] + b.data<int32_t>()[m];
              const auto acc32 = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(acc)));
              wrapped += std::string(backend) == "reference" && acc32 != acc;
              const int64_t want =
                  std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(static_cast<float>(acc32) / ys)) + a.zy, a.lo, a.hi);
              ASSERT_EQ(test::code_at(y, r * M + m), want)
                  << op << " on " << backend << " (" << k.impl << "): x " << xs[r] << " zx " << a.zx << " w "
                  << int{w.data<int8_t>()[m]} << " bias " << b.data<int32_t>()[m] << " zy " << a.zy;
            }
        }
      }
  EXPECT_GT(wrapped, 0) << "the cases must leave int32";
}

// QLinearMatMul of two quantized activations (attention's q k^T), batch dims
// broadcast: the kernel equals the test's own int64 sums requantized as ONNX does
// (round half to even of float(acc) * float(sa * sb / sy), plus zero point, saturated).
TEST(Int8Kernels, MatMulOfTwoActivations) {
  std::mt19937 rng(9);
  const int64_t B = 3, M = 5, K = 7, N = 4;
  Tensor a = test::random_codes({B, M, K}, DType::kUInt8, rng);
  Tensor b = test::random_codes({1, K, N}, DType::kInt8, rng);  // broadcast over the batch
  ir::Node n;
  n.op = "QLinearMatMul";
  n.name = "scores";
  n.inputs = {"a", "b"};
  ir::QInfo aq, bq, yq;
  aq.dtype = DType::kUInt8;
  aq.scale = {0.021f};
  aq.zero_point = {131};
  bq.dtype = DType::kInt8;
  bq.scale = {0.017f};
  bq.zero_point = {-3};
  yq.dtype = DType::kInt8;
  yq.scale = {0.09f};
  yq.zero_point = {4};
  n.in_q = {aq, bq};
  n.out_q = yq;
  // The reference kernel, and the onednn backend's vectorised one (oneDNN's int8
  // matmul takes constant weights only), each against the test's own sums.
  for (const auto& [backend, impl] : {std::pair<std::string, std::string>{"reference", "reference"}, {"onednn", "simd"}}) {
    Kernel k = make_kernel(n, {{a.shape(), DType::kUInt8}, {b.shape(), DType::kInt8}}, {nullptr, nullptr}, backend);
    EXPECT_EQ(k.impl, impl) << backend;
    ASSERT_EQ(k.outputs[0].shape, (Shape{B, M, N}));
    Tensor y(k.outputs[0].shape, DType::kInt8);
    k.run({&a, &b}, {&y});
    const float m = aq.scale[0] * bq.scale[0] / yq.scale[0];
    int64_t saturated = 0;
    for (int64_t p = 0; p < B; ++p)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          int64_t acc = 0;
          for (int64_t kk = 0; kk < K; ++kk)
            acc += int64_t{a.data<uint8_t>()[(p * M + i) * K + kk] - 131} * (b.data<int8_t>()[kk * N + j] + 3);
          const int64_t want = std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(static_cast<float>(acc) * m)) + 4, -128, 127);
          saturated += want == -128 || want == 127;
          ASSERT_EQ(y.data<int8_t>()[(p * M + i) * N + j], want) << p << "," << i << "," << j;
        }
    EXPECT_LT(saturated, B * M * N / 2) << "the case must mostly stay in range";
  }
}

TEST(Int8Kernels, OneDnnMatMulEqualsReference) {
  std::mt19937 rng(6);
  for (bool tb : {true, false}) {
    ir::Node n;
    n.op = "QGemm";
    n.name = "qgemm";
    n.inputs = {"x", "w"};
    n.attrs["transB"].i = tb ? 1 : 0;
    const int64_t R = 7, K = 40, M = 24;
    Tensor x = test::random_codes({R, K}, DType::kUInt8, rng);
    Tensor w = test::random_codes(tb ? Shape{M, K} : Shape{K, M}, DType::kInt8, rng);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(w.data<int8_t>()[i] / 2);
    ir::QInfo xq, wq, yq;
    xq.dtype = DType::kUInt8;
    xq.scale = {0.03f};
    xq.zero_point = {120};
    wq.dtype = DType::kInt8;
    for (int64_t m = 0; m < M; ++m) {
      wq.scale.push_back(0.002f + 0.0001f * static_cast<float>(m));
      wq.zero_point.push_back(0);
    }
    yq.dtype = DType::kUInt8;
    yq.scale = {0.1f};
    yq.zero_point = {128};
    n.in_q = {xq, wq};
    n.out_q = yq;
    bool used = false;
    auto r = compare(n, {{x.shape(), x.dtype()}, {w.shape(), w.dtype()}}, {nullptr, &w}, {&x, &w}, &used);
    EXPECT_TRUE(used) << "u8 x 7-bit weights run on oneDNN";
    EXPECT_EQ(r.first, 0);
    EXPECT_EQ(r.second, 1.0);
  }
}

// Expand (the class token broadcast over the batch): any dtype is copied along the
// broadcast dims; a negative or incompatible shape is a DataError naming the node.
TEST(ReferenceKernels, ExpandBroadcastsAndRejectsBadShapes) {
  ir::Node n;
  n.op = "Expand";
  n.name = "expand_token";
  n.inputs = {"x", "shape"};
  Tensor x({1, 1, 3}, DType::kInt8);
  for (int i = 0; i < 3; ++i) x.data<int8_t>()[i] = static_cast<int8_t>(i - 1);
  auto shape_of = [](std::vector<int64_t> v) {
    Tensor s({static_cast<int64_t>(v.size())}, DType::kInt64);
    std::copy(v.begin(), v.end(), s.data<int64_t>());
    return s;
  };
  Tensor s = shape_of({2, 1, 1});
  Kernel k = make_kernel(n, {{x.shape(), DType::kInt8}, {s.shape(), DType::kInt64}}, {nullptr, &s}, "onednn");
  ASSERT_EQ(k.outputs[0].shape, (Shape{2, 1, 3}));
  Tensor y(k.outputs[0].shape, DType::kInt8);
  k.run({&x, &s}, {&y});
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(y.data<int8_t>()[i], static_cast<int8_t>(i % 3 - 1)) << i;
  for (const auto& bad : {std::vector<int64_t>{-2, 1, 1}, std::vector<int64_t>{1, 1, 4}}) {
    Tensor b = shape_of(bad);
    try {
      make_kernel(n, {{x.shape(), DType::kInt8}, {b.shape(), DType::kInt64}}, {nullptr, &b}, "onednn");
      ADD_FAILURE() << "a bad Expand shape must be refused";
    } catch (const qfx::DataError& e) {
      EXPECT_NE(std::string(e.what()).find("expand_token"), std::string::npos) << e.what();
    }
  }
}
