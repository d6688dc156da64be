// 16x8 layers (int16 activations, int8 weights; TFLite's 16x8 scheme): the
// reference QLinearConv / QGemm accumulate in 64 bits and requantize under each
// target arithmetic; the test recomputes every output with its own loops and the
// real-number multiplier, the onednn backend leaves these layers to the reference,
// and int16 QuantizeLinear / DequantizeLinear follow ONNX's formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../../backends/src/kernels.h"
#include "qfx/error.h"

using namespace qfx::runtime;

namespace {

Tensor random_int16(const Shape& s, int lo, int hi, std::mt19937& rng) {
  Tensor t(s, DType::kInt16);
  std::uniform_int_distribution<int> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int16_t>()[i] = static_cast<int16_t>(d(rng));
  return t;
}

Tensor random_int8(const Shape& s, std::mt19937& rng) {
  Tensor t(s, DType::kInt8);
  std::uniform_int_distribution<int> d(-127, 127);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int8_t>()[i] = static_cast<int8_t>(d(rng));
  return t;
}

int32_t code(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt16 ? t.data<int16_t>()[i] : t.data<int8_t>()[i];
}

// The real result acc · m rounded to an integer as the arithmetic's rounding
// (the float mode: half to even), from long double (exact for these magnitudes).
int64_t rounded(int64_t acc, double m, RequantMode mode, Rounding r) {
  const long double v = static_cast<long double>(acc) * static_cast<long double>(m);
  if (mode == RequantMode::kFloat || r == Rounding::kHalfEven) return static_cast<int64_t>(std::nearbyintl(v));
  if (r == Rounding::kHalfUp) return static_cast<int64_t>(std::floor(v + 0.5L));
  return static_cast<int64_t>(std::roundl(v));  // half away from zero
}

struct Target {
  const char* name;
  Arithmetic a;
  bool pow2;
  int64_t tolerance;  // |kernel - exact rounding of acc·m| allowed (fixed point: the multiplier's rounding)
};

std::vector<Target> targets() {
  Arithmetic onnx;
  Arithmetic fixed;
  fixed.requantize = RequantMode::kFixedPoint;
  fixed.rounding = Rounding::kHalfAwayFromZero;
  Arithmetic fixed16 = fixed;
  fixed16.multiplier_bits = 16;
  fixed16.rounding = Rounding::kHalfUp;
  Arithmetic shift;
  shift.requantize = RequantMode::kShift;
  shift.rounding = Rounding::kHalfUp;
  shift.accumulator_bits = 24;  // applies to 8x8 layers; 16x8 layers accumulate in 64 bits
  return {{"float", onnx, false, 0}, {"fixed_point32", fixed, false, 1}, {"fixed_point16", fixed16, false, 1},
          {"shift", shift, true, 0}};
}

ir::QInfo qinfo(DType d, std::vector<float> scale, int32_t zp = 0) {
  ir::QInfo q;
  q.dtype = d;
  q.scale = std::move(scale);
  q.zero_point.assign(q.scale.size(), zp);
  return q;
}

}  // namespace

// 3x3 conv, 64 input channels, int16 input; int16 and int8 outputs. One image is
// all-maximal, so its sums (576 · 32767 · 127 ≈ 2.4e9) exceed int32: a 32-bit
// accumulator would wrap, the 64-bit one gives the exact result.
TEST(Int16Kernels, ConvAccumulatesIn64BitsUnderEachArithmetic) {
  for (const auto& tc : targets()) {
    for (DType yd : {DType::kInt16, DType::kInt8}) {
      std::mt19937 rng(31);
      const int64_t N = 2, C = 64, H = 5, W = 4, M = 6;
      Tensor x = random_int16({N, C, H, W}, -32768, 32767, rng);
      for (int64_t i = C * H * W; i < 2 * C * H * W; ++i) x.data<int16_t>()[i] = 32767;
      Tensor w = random_int8({M, C, 3, 3}, rng);
      for (int64_t i = 0; i < C * 9; ++i) w.data<int8_t>()[i] = 127;  // channel 0: every product maximal
      ir::Node n;
      n.op = "QLinearConv";
      n.name = "conv16x8";
      n.inputs = {"x", "w"};
      n.attrs["pads"].ints = {1, 1, 1, 1};
      n.arithmetic = tc.a;
      std::vector<float> ws;
      for (int64_t m = 0; m < M; ++m) ws.push_back(tc.pow2 ? std::ldexp(1.0f, -7 - static_cast<int>(m % 3)) : 0.0013f * (1 + m % 4));
      const float xs = tc.pow2 ? std::ldexp(1.0f, -12) : 3.1e-4f;
      // Random sums (~3e7) land across the output range; channel 0's 2.4e9 saturate
      // at the top code (a wrapped 32-bit sum would give a negative one).
      const float ys = yd == DType::kInt16 ? (tc.pow2 ? std::ldexp(1.0f, -8) : 1.3e-3f) : (tc.pow2 ? 0.5f : 0.13f);
      n.in_q = {qinfo(DType::kInt16, {xs}), qinfo(DType::kInt8, ws)};
      n.out_q = qinfo(yd, {ys}, yd == DType::kInt16 ? 0 : -3);
      const std::vector<Meta> metas = {{x.shape(), DType::kInt16}, {w.shape(), DType::kInt8}};
      KernelChoice choice;
      Kernel dnn = make_kernel(n, metas, {nullptr, &w}, "onednn", false, &choice);
      EXPECT_EQ(dnn.impl, "reference") << tc.name;
      bool named = false;
      for (const auto& d : choice.declined) named |= d.reason.find("int16") != std::string::npos;
      EXPECT_TRUE(named) << tc.name << ": onednn's decline names int16";
      Tensor y(dnn.outputs[0].shape, yd);
      ASSERT_EQ(dnn.outputs[0].dtype, yd);
      dnn.run({&x, &w}, {&y});
      const int32_t lo = yd == DType::kInt16 ? -32768 : -128, hi = yd == DType::kInt16 ? 32767 : 127;
      int64_t beyond_int32 = 0, off_by_one = 0;
      for (int64_t nb = 0; nb < N; ++nb)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t oh = 0; oh < H; ++oh)
            for (int64_t ow = 0; ow < W; ++ow) {
              int64_t acc = 0;
              for (int64_t c = 0; c < C; ++c)
                for (int64_t kh = 0; kh < 3; ++kh)
                  for (int64_t kw = 0; kw < 3; ++kw) {
                    const int64_t ih = oh + kh - 1, iw = ow + kw - 1;
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                    acc += int64_t{x.data<int16_t>()[((nb * C + c) * H + ih) * W + iw]} *
                           w.data<int8_t>()[((m * C + c) * 3 + kh) * 3 + kw];
                  }
              beyond_int32 += acc > INT32_MAX || acc < INT32_MIN;
              const double mult = static_cast<double>(static_cast<float>(xs * ws[static_cast<size_t>(m)] / ys));
              const int64_t want = std::clamp<int64_t>(rounded(acc, mult, tc.a.requantize, tc.a.rounding) + n.out_q.zero_point[0], lo, hi);
              const int64_t got = code(y, ((nb * M + m) * H + oh) * W + ow);
              ASSERT_LE(std::abs(got - want), tc.tolerance) << tc.name << " acc " << acc;
              off_by_one += got != want;
            }
      EXPECT_GT(beyond_int32, 0) << tc.name << ": the case must need more than 32 bits";
      if (tc.tolerance == 0) EXPECT_EQ(off_by_one, 0) << tc.name;
    }
  }
}

// QGemm with int16 input and int16 output (transB), each arithmetic: the test's sums.
TEST(Int16Kernels, GemmMatchesExactSums) {
  for (const auto& tc : targets()) {
    std::mt19937 rng(32);
    const int64_t R = 4, K = 96, M = 7;
    Tensor x = random_int16({R, K}, -30000, 30000, rng);
    Tensor w = random_int8({M, K}, rng);
    ir::Node n;
    n.op = "QGemm";
    n.name = "fc16x8";
    n.inputs = {"x", "w"};
    n.attrs["transB"].i = 1;
    n.arithmetic = tc.a;
    const float xs = tc.pow2 ? std::ldexp(1.0f, -11) : 4.4e-4f, wsc = tc.pow2 ? std::ldexp(1.0f, -8) : 0.0037f;
    const float ys = tc.pow2 ? std::ldexp(1.0f, -6) : 0.013f;
    n.in_q = {qinfo(DType::kInt16, {xs}), qinfo(DType::kInt8, {wsc})};
    n.out_q = qinfo(DType::kInt16, {ys});
    Kernel k = make_kernel(n, {{x.shape(), DType::kInt16}, {w.shape(), DType::kInt8}}, {nullptr, &w}, "onednn");
    EXPECT_EQ(k.impl, "reference");
    Tensor y(k.outputs[0].shape, DType::kInt16);
    k.run({&x, &w}, {&y});
    const double mult = static_cast<double>(xs * wsc / ys);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t m = 0; m < M; ++m) {
        int64_t acc = 0;
        for (int64_t kk = 0; kk < K; ++kk) acc += int64_t{x.data<int16_t>()[r * K + kk]} * w.data<int8_t>()[m * K + kk];
        const int64_t want = std::clamp<int64_t>(rounded(acc, mult, tc.a.requantize, tc.a.rounding), -32768, 32767);
        ASSERT_LE(std::abs(code(y, r * M + m) - want), tc.tolerance) << tc.name << " acc " << acc;
      }
  }
}

// QuantizeLinear to int16 (ONNX: saturate(round_half_even(x / scale) + zp)) and back.
TEST(Int16Kernels, QuantizeDequantizeLinear) {
  Tensor s({}, DType::kFloat32), z({}, DType::kInt16);
  s.data<float>()[0] = 0.001f;
  z.data<int16_t>()[0] = 5;
  ir::Node q;
  q.op = "QuantizeLinear";
  q.name = "q16";
  q.inputs = {"x", "s", "z"};
  ir::Node dq = q;
  dq.op = "DequantizeLinear";
  dq.name = "dq16";
  const std::vector<float> xs = {0.0f, 0.0025f, -0.0035f, 1.0f, -40.0f, 40.0f, 32.7615f};
  Tensor x({static_cast<int64_t>(xs.size())}, DType::kFloat32);
  std::copy(xs.begin(), xs.end(), x.data<float>());
  Kernel kq = make_kernel(q, {{x.shape(), DType::kFloat32}, {{}, DType::kFloat32}, {{}, DType::kInt16}}, {nullptr, &s, &z}, "onednn");
  ASSERT_EQ(kq.outputs[0].dtype, DType::kInt16);
  Tensor c(x.shape(), DType::kInt16);
  kq.run({&x, &s, &z}, {&c});
  const std::vector<int> want = {5, 7, 1, 1005, -32768, 32767, 32767};  // 2.5 -> 2, -3.5 -> -4 (half to even)
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(c.data<int16_t>()[i], want[i]) << "x = " << xs[i];
  Kernel kd = make_kernel(dq, {{x.shape(), DType::kInt16}, {{}, DType::kFloat32}, {{}, DType::kInt16}}, {nullptr, &s, &z}, "onednn");
  Tensor back(x.shape(), DType::kFloat32);
  kd.run({&c, &s, &z}, {&back});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(back.data<float>()[i], static_cast<float>(want[i] - 5) * 0.001f);
}
