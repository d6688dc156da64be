// The `cuda` backend against the reference kernels, op by op on random codes, under
// ONNX's arithmetic and two target arithmetics: every output code must be equal. On a
// machine without a CUDA device each test is reported skipped with the reason, except
// NoDevice.*, which checks that the backend then declines every node to the CPU.
#include <gtest/gtest.h>

#include <random>

#include "../../backends/src/kernels.h"
#include "../backends/int8_test_util.h"
#include "cuda_test_util.h"
#include "qfx/error.h"

using namespace qfx::runtime;

namespace {

struct Target {
  const char* name;
  Arithmetic ar;
  bool pow2;  // scales must be powers of two (shift requantization)
};

std::vector<Target> targets() {
  Arithmetic tfl;  // configs/backends/tflite_like.yaml
  tfl.requantize = RequantMode::kFixedPoint;
  tfl.rounding = Rounding::kHalfAwayFromZero;
  tfl.elementwise = RequantMode::kFixedPoint;
  Arithmetic acc;  // configs/backends/example_accel.yaml
  acc.requantize = RequantMode::kShift;
  acc.rounding = Rounding::kHalfUp;
  acc.accumulator_bits = 24;
  acc.elementwise = RequantMode::kFixedPoint;
  acc.elementwise_multiplier_bits = 16;
  acc.elementwise_left_shift = 12;
  return {{"onnx", Arithmetic{}, false}, {"tflite_like", tfl, false}, {"example_accel", acc, true}};
}

ir::QInfo qinfo(DType dt, std::vector<float> scale, std::vector<int32_t> zp) {
  ir::QInfo q;
  q.dtype = dt;
  q.scale = std::move(scale);
  q.zero_point = std::move(zp);
  return q;
}

// A 3x3 MaxPool, stride 2, padding 1.
ir::Node maxpool_node() {
  ir::Node mp;
  mp.op = "MaxPool";
  mp.name = "pool";
  mp.inputs = {"x"};
  mp.attrs["kernel_shape"].ints = {3, 3};
  mp.attrs["strides"].ints = {2, 2};
  mp.attrs["pads"].ints = {1, 1, 1, 1};
  return mp;
}

// QLinearGlobalAveragePool, u8 codes in and out, under arithmetic `ar`.
ir::Node qgap_node(const Arithmetic& ar) {
  ir::Node n;
  n.op = "QLinearGlobalAveragePool";
  n.name = "gap";
  n.inputs = {"x"};
  n.arithmetic = ar;
  n.in_q = {qinfo(DType::kUInt8, {0.05f}, {7})};
  n.out_q = qinfo(DType::kUInt8, {0.02f}, {3});
  return n;
}

// QRelu or QClip (`op`) on s8 codes under arithmetic `ar`.
ir::Node qact_node(const Arithmetic& ar, const std::string& op) {
  ir::Node n;
  n.op = op;
  n.name = "act";
  n.inputs = {"x"};
  n.arithmetic = ar;
  n.in_q = {qinfo(DType::kInt8, {0.05f}, {-10})};
  n.out_q = qinfo(DType::kInt8, {0.04f}, {-128});
  n.fused_act = op == "QClip" ? "Clip" : "Relu";
  n.clip_hi = 4.0f;
  return n;
}

struct ConvCase {
  int64_t N, C, H, W, M, k, stride, pad, group;
  DType xdt, ydt, wdt;
  int32_t wz;
  const char* act;
  const char* impl;  // the implementation expected to run it ("": either)
};

}  // namespace

TEST(CudaKernels, QLinearConvEqualsReference) {
  QFX_REQUIRE_CUDA();
  std::mt19937 rng(11);
  const ConvCase cases[] = {
      {2, 8, 12, 12, 16, 3, 1, 1, 1, DType::kUInt8, DType::kUInt8, DType::kInt8, 0, "", "cublaslt"},      // GEMM path
      {1, 32, 14, 14, 64, 3, 2, 1, 1, DType::kInt8, DType::kInt8, DType::kInt8, 0, "Relu", "cublaslt"},   // GEMM, strided
      {2, 6, 9, 7, 5, 1, 1, 0, 1, DType::kUInt8, DType::kInt8, DType::kInt8, 0, "Clip", ""},      // K = 6: padded to 8
      {1, 16, 10, 10, 16, 3, 2, 1, 16, DType::kUInt8, DType::kUInt8, DType::kInt8, 0, "Relu", "cuda"},  // depthwise: direct
      {1, 8, 8, 8, 8, 3, 1, 1, 2, DType::kInt8, DType::kUInt8, DType::kInt8, 0, "", "cuda"},          // grouped: direct
      {1, 8, 8, 8, 8, 3, 1, 1, 1, DType::kUInt8, DType::kUInt8, DType::kInt8, 3, "", "cuda"},         // weight zero point: direct
      {1, 4, 7, 7, 6, 3, 1, 2, 1, DType::kUInt8, DType::kUInt8, DType::kUInt8, 120, "", "cuda"},      // u8 weights: direct
  };
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const Target& t : targets())
    for (const auto& c : cases) {
      ir::Node n = test::conv_node("QLinearConv", "qconv", c.group, c.stride, c.pad);
      n.arithmetic = t.ar;
      Tensor x = test::random_codes({c.N, c.C, c.H, c.W}, c.xdt, rng);
      Tensor w = test::random_codes({c.M, c.C / c.group, c.k, c.k}, c.wdt, rng);
      Tensor b({c.M}, DType::kInt32);
      std::vector<float> ws;
      std::vector<int32_t> wzs;
      for (int64_t m = 0; m < c.M; ++m) {
        ws.push_back(t.pow2 ? std::ldexp(1.0f, -7 - static_cast<int>(m % 3)) : 0.001f * (1.0f + std::abs(nd(rng))));
        wzs.push_back(c.wz);
        b.data<int32_t>()[m] = static_cast<int32_t>(nd(rng) * 2000);
      }
      n.in_q = {qinfo(c.xdt, {t.pow2 ? 0.015625f : 0.02f}, {c.xdt == DType::kUInt8 ? 128 : 3}), qinfo(c.wdt, ws, wzs)};
      n.out_q = qinfo(c.ydt, {t.pow2 ? 0.125f : 0.05f}, {c.ydt == DType::kUInt8 ? 60 : -5});
      n.fused_act = c.act;
      n.clip_hi = 3.0f;
      const std::string what = std::string(t.name) + " M=" + std::to_string(c.M) + " group=" + std::to_string(c.group) +
                               " wz=" + std::to_string(c.wz);
      test::expect_cuda_equals_reference(n, {nullptr, &w, &b}, {&x, &w, &b}, what, c.impl);
    }
}

TEST(CudaKernels, QGemmAndMatMulEqualReference) {
  QFX_REQUIRE_CUDA();
  std::mt19937 rng(12);
  for (const Target& t : targets())
    for (const char* op : {"QGemm", "QLinearMatMul"})
      for (int64_t rows : {1, 7}) {
        const int64_t K = 37, M = 24;
        const bool gemm = std::string(op) == "QGemm";
        ir::Node n;
        n.op = op;
        n.name = "fc";
        n.inputs = {"x", "w", "b"};
        if (gemm) n.attrs["transB"].i = 1;
        n.arithmetic = t.ar;
        Tensor x = test::random_codes({rows, K}, DType::kUInt8, rng);
        Tensor w = test::random_codes(gemm ? Shape{M, K} : Shape{K, M}, DType::kInt8, rng);
        Tensor b({M}, DType::kInt32);
        std::vector<float> ws(static_cast<size_t>(M), t.pow2 ? 0.0078125f : 0.0021f);
        for (int64_t m = 0; m < M; ++m) b.data<int32_t>()[m] = static_cast<int32_t>((m * 7919) % 4001 - 2000);
        n.in_q = {qinfo(DType::kUInt8, {t.pow2 ? 0.03125f : 0.03f}, {120}), qinfo(DType::kInt8, ws, std::vector<int32_t>(ws.size(), 0))};
        n.out_q = qinfo(DType::kInt8, {t.pow2 ? 0.25f : 0.2f}, {2});
        test::expect_cuda_equals_reference(n, {nullptr, &w, &b}, {&x, &w, &b},
                                           std::string(t.name) + " " + op + " rows=" + std::to_string(rows));
      }
}

TEST(CudaKernels, ElementwiseAndPoolingEqualReference) {
  QFX_REQUIRE_CUDA();
  std::mt19937 rng(13);
  for (const Target& t : targets()) {
    for (const char* op : {"QLinearAdd", "QLinearMul"}) {  // broadcast of [2, 5, 1, 4] with [5, 3, 1]
      ir::Node n;
      n.op = op;
      n.name = "binary";
      n.inputs = {"a", "b"};
      n.arithmetic = t.ar;
      n.in_q = {qinfo(DType::kUInt8, {t.pow2 ? 0.0625f : 0.061f}, {130}), qinfo(DType::kInt8, {t.pow2 ? 0.03125f : 0.029f}, {-4})};
      n.out_q = qinfo(DType::kUInt8, {t.pow2 ? 0.125f : 0.11f}, {100});
      n.fused_act = "Relu";
      Tensor a = test::random_codes({2, 5, 1, 4}, DType::kUInt8, rng), b = test::random_codes({5, 3, 1}, DType::kInt8, rng);
      test::expect_cuda_equals_reference(n, {nullptr, nullptr}, {&a, &b}, std::string(t.name) + " " + op);
    }
    for (const char* op : {"QRelu", "QClip"}) {
      Tensor x = test::random_codes({3, 4, 5, 6}, DType::kInt8, rng);
      test::expect_cuda_equals_reference(qact_node(t.ar, op), {nullptr}, {&x}, std::string(t.name) + " " + op);
    }
    Tensor x = test::random_codes({2, 9, 7, 7}, DType::kUInt8, rng);
    test::expect_cuda_equals_reference(qgap_node(t.ar), {nullptr}, {&x}, std::string(t.name) + " gap");
  }
  const ir::Node mp = maxpool_node();
  for (DType dt : {DType::kUInt8, DType::kInt8}) {
    Tensor x = test::random_codes({2, 3, 11, 10}, dt, rng);
    test::expect_cuda_equals_reference(mp, {nullptr}, {&x}, "maxpool");
  }
}

// Channels last between GPU kernels: each int8 op that takes it, with its input(s)
// NHWC and its consumers reading NHWC, against the reference on plain values.
TEST(CudaKernels, ChannelsLastEqualsReference) {
  QFX_REQUIRE_CUDA();
  std::mt19937 rng(17);
  struct Case {
    int64_t C, M, k, stride, pad, group;
    DType xdt;
    bool x_nhwc;
    const char* impl;
    const char* what;
  };
  const Case convs[] = {
      {8, 16, 3, 1, 1, 1, DType::kUInt8, true, "cublaslt", "3x3, u8, four channels per word"},
      {6, 10, 3, 2, 1, 1, DType::kInt8, true, "cublaslt", "3x3, C = 6: one column per thread, K padded"},
      {32, 24, 1, 1, 0, 1, DType::kInt8, true, "cublaslt", "pointwise s8: no im2col"},
      {16, 8, 1, 1, 0, 1, DType::kUInt8, true, "cublaslt", "pointwise u8"},
      {3, 16, 3, 2, 1, 1, DType::kUInt8, false, "cublaslt", "NCHW input, channels-last output"},
      {16, 16, 3, 2, 1, 16, DType::kUInt8, true, "cuda", "depthwise: direct"},
      {8, 8, 3, 1, 1, 2, DType::kInt8, true, "cuda", "grouped: direct"},
  };
  for (const Target& t : targets())
    for (const Case& c : convs) {
      ir::Node n = test::conv_node("QLinearConv", "qconv", c.group, c.stride, c.pad);
      n.arithmetic = t.ar;
      Tensor x = test::random_codes({2, c.C, 9, 11}, c.xdt, rng);
      Tensor w = test::random_codes({c.M, c.C / c.group, c.k, c.k}, DType::kInt8, rng);
      Tensor b({c.M}, DType::kInt32);
      std::vector<float> ws;
      for (int64_t m = 0; m < c.M; ++m) {
        ws.push_back(t.pow2 ? std::ldexp(1.0f, -7 - static_cast<int>(m % 3)) : 0.001f * static_cast<float>(1 + m % 5));
        b.data<int32_t>()[m] = static_cast<int32_t>((m * 7919) % 4001 - 2000);
      }
      n.in_q = {qinfo(c.xdt, {t.pow2 ? 0.015625f : 0.02f}, {c.xdt == DType::kUInt8 ? 128 : 3}),
                qinfo(DType::kInt8, ws, std::vector<int32_t>(ws.size(), 0))};
      n.out_q = qinfo(DType::kUInt8, {t.pow2 ? 0.125f : 0.05f}, {60});
      n.fused_act = "Relu";
      test::expect_cuda_nhwc_equals_reference(n, {nullptr, &w, &b}, {&x, &w, &b}, std::string(t.name) + " conv " + c.what,
                                              c.x_nhwc, true, c.impl);
    }
  for (const Target& t : targets()) {
    ir::Node add;
    add.op = "QLinearAdd";
    add.name = "add";
    add.inputs = {"a", "b"};
    add.arithmetic = t.ar;
    add.in_q = {qinfo(DType::kUInt8, {t.pow2 ? 0.0625f : 0.061f}, {130}), qinfo(DType::kUInt8, {t.pow2 ? 0.03125f : 0.029f}, {4})};
    add.out_q = qinfo(DType::kUInt8, {t.pow2 ? 0.125f : 0.11f}, {100});
    add.fused_act = "Relu";
    Tensor a = test::random_codes({2, 12, 5, 7}, DType::kUInt8, rng), b = test::random_codes({2, 12, 5, 7}, DType::kUInt8, rng);
    test::expect_cuda_nhwc_equals_reference(add, {nullptr, nullptr}, {&a, &b}, std::string(t.name) + " add", true, true);
    Tensor odd_a = test::random_codes({1, 3, 5, 7}, DType::kUInt8, rng), odd_b = test::random_codes({1, 3, 5, 7}, DType::kUInt8, rng);
    test::expect_cuda_equals_reference(add, {nullptr, nullptr}, {&odd_a, &odd_b}, std::string(t.name) + " add, 105 codes");
    Tensor c = test::random_codes({2, 12, 5, 7}, DType::kInt8, rng);
    test::expect_cuda_nhwc_equals_reference(qact_node(t.ar, "QRelu"), {nullptr}, {&c}, std::string(t.name) + " relu", true, true);
    test::expect_cuda_nhwc_equals_reference(qgap_node(t.ar), {nullptr}, {&a}, std::string(t.name) + " gap", true, false);
  }
  const ir::Node mp = maxpool_node();
  for (DType dt : {DType::kUInt8, DType::kInt8}) {
    Tensor x = test::random_codes({2, 5, 11, 10}, dt, rng);
    test::expect_cuda_nhwc_equals_reference(mp, {nullptr}, {&x}, "maxpool", true, true);
  }
}

TEST(CudaKernels, QuantizeDequantizeEqualReference) {
  QFX_REQUIRE_CUDA();
  std::mt19937 rng(14);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  Tensor x({2, 3, 4, 5}, DType::kFloat32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = nd(rng);
  x.data<float>()[0] = 2.5f * 0.1f;  // a tie at scale 0.1
  x.data<float>()[1] = std::nanf("");
  for (bool per_channel : {false, true}) {
    Tensor scale = per_channel ? Tensor({3}, DType::kFloat32) : Tensor({1}, DType::kFloat32);
    Tensor zp = per_channel ? Tensor({3}, DType::kInt8) : Tensor({1}, DType::kInt8);
    for (int64_t c = 0; c < scale.numel(); ++c) {
      scale.data<float>()[c] = 0.1f * static_cast<float>(c + 1);
      zp.data<int8_t>()[c] = static_cast<int8_t>(c * 5 - 3);
    }
    ir::Node q;
    q.op = "QuantizeLinear";
    q.name = "q";
    q.inputs = {"x", "s", "z"};
    test::expect_cuda_equals_reference(q, {nullptr, &scale, &zp}, {&x, &scale, &zp}, "quantize");
    Tensor codes = test::random_codes({2, 3, 4, 5}, DType::kInt8, rng);
    ir::Node dq = q;
    dq.op = "DequantizeLinear";
    dq.name = "dq";
    test::expect_cuda_equals_reference(dq, {nullptr, &scale, &zp}, {&codes, &scale, &zp},
                                       "dequantize");
  }
}

TEST(CudaKernels, FloatOpsMatchReference) {
  QFX_REQUIRE_CUDA();
  std::mt19937 rng(16);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto randn = [&](const Shape& s) {
    Tensor t(s, DType::kFloat32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = nd(rng);
    return t;
  };
  struct Case {
    int64_t C, M, k, stride, pad, group;
    const char* act;
  };
  for (const Case& c : {Case{8, 16, 3, 1, 1, 1, "Relu"}, Case{16, 16, 3, 2, 1, 16, ""}, Case{12, 20, 1, 1, 0, 1, "Clip"},
                        Case{6, 9, 5, 2, 2, 3, ""}}) {
    ir::Node n = test::conv_node("Conv", "conv", c.group, c.stride, c.pad);
    n.fused_act = c.act;
    n.clip_lo = 0.0f;
    n.clip_hi = 6.0f;
    Tensor x = randn({2, c.C, 13, 11}), w = randn({c.M, c.C / c.group, c.k, c.k}), b = randn({c.M});
    test::expect_cuda_near_reference(n, {nullptr, &w, &b}, {&x, &w, &b}, "Conv group " + std::to_string(c.group));
  }
  for (const char* op : {"Gemm", "MatMul"}) {
    ir::Node n;
    n.op = op;
    n.name = "fc";
    const bool gemm = std::string(op) == "Gemm";
    n.inputs = gemm ? std::vector<std::string>{"x", "w", "b"} : std::vector<std::string>{"x", "w"};
    if (gemm) n.attrs["transB"].i = 1;
    Tensor x = randn({5, 300}), w = gemm ? randn({70, 300}) : randn({300, 70}), b = randn({70});
    if (gemm) test::expect_cuda_near_reference(n, {nullptr, &w, &b}, {&x, &w, &b}, op);
    else test::expect_cuda_near_reference(n, {nullptr, &w}, {&x, &w}, op);
  }
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    ir::Node n;
    n.op = op;
    n.name = "binary";
    n.inputs = {"a", "b"};
    if (std::string(op) == "Add") n.fused_act = "Relu";  // a Relu after Add is fused into it at load
    Tensor a = randn({2, 5, 1, 4}), b = randn({5, 3, 1});
    if (std::string(op) == "Div")
      for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = 1.5f + std::abs(b.data<float>()[i]);
    test::expect_cuda_near_reference(n, {nullptr, nullptr}, {&a, &b}, op, 0.0);  // one rounding each: exact
  }
  ir::Node relu;
  relu.op = "Relu";
  relu.name = "relu";
  relu.inputs = {"x"};
  Tensor x = randn({2, 3, 9, 10});
  test::expect_cuda_near_reference(relu, {nullptr}, {&x}, "Relu", 0.0);
  const ir::Node mp = maxpool_node();
  test::expect_cuda_near_reference(mp, {nullptr}, {&x}, "MaxPool", 0.0);
  ir::Node gap;
  gap.op = "GlobalAveragePool";
  gap.name = "gap";
  gap.inputs = {"x"};
  test::expect_cuda_near_reference(gap, {nullptr}, {&x}, "GlobalAveragePool", 1e-5);
}

// Without a device the backend exists (when built with CUDA) and every node runs on
// the CPU, the registry saying why the CUDA kernel declined.
TEST(NoDevice, CudaBackendDeclinesToTheCpu) {
  if (!cuda_built()) GTEST_SKIP() << cuda_unavailable_reason();
  if (cuda_unavailable_reason().empty()) GTEST_SKIP() << "a CUDA device is present: the CudaKernels tests run instead";
  std::mt19937 rng(15);
  ir::Node mp;
  mp.op = "MaxPool";
  mp.name = "pool";
  mp.inputs = {"x"};
  mp.attrs["kernel_shape"].ints = {2, 2};
  Tensor x = test::random_codes({1, 2, 4, 4}, DType::kUInt8, rng);
  KernelChoice choice;
  Kernel k = make_kernel(mp, {{x.shape(), x.dtype()}}, {nullptr}, "cuda", false, &choice);
  EXPECT_NE(k.impl, "cuda");
  ASSERT_FALSE(choice.declined.empty());
  EXPECT_EQ(choice.declined[0].impl, "cuda");
  EXPECT_NE(choice.declined[0].reason.find("no CUDA device"), std::string::npos) << choice.declined[0].reason;
  float v = 1.0f, lo = 0.0f, hi = 0.0f;
  double counts[4] = {};
  bool nonfinite = false;
  const hd::HistogramLattice g{0.0, 4.0, 0, 1};
  EXPECT_THROW(cuda_lattice_histogram(&v, 1, g, 4, counts, &lo, &hi, &nonfinite), qfx::ExecutionError);
}
