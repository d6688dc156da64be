// Target arithmetic: the fixed-point primitives against TFLite's and gemmlowp's
// published values, properties of the requantization modes, and the Arithmetic
// JSON form carried in ONNX metadata.
#include "qfx/runtime/arithmetic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "qfx/error.h"
#include "qfx/runtime/kernel.h"

using namespace qfx::runtime;

namespace {
constexpr int32_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();

std::pair<int32_t, int> qm(double m) {
  const QuantizedMultiplier q = quantize_multiplier(m, 32);
  return {q.multiplier, q.shift};
}
int32_t mbqm(int32_t x, double m) {
  return multiply_by_quantized_multiplier(x, quantize_multiplier(m, 32), 32, Rounding::kHalfAwayFromZero);
}
}  // namespace

// tensorflow/lite/kernels/internal/quantization_util_test.cc (QuantizeMultiplierSmallerThanOneExp,
// QuantizeMultiplierGreaterThanOne, QuantizeMultiplierUnderflow, QuantizeMultiplierArray).
TEST(Arithmetic, QuantizeMultiplierMatchesTfLite) {
  EXPECT_EQ(qm(0.25), std::make_pair(1073741824, -1));
  EXPECT_EQ(qm(0.50 - 5e-9), std::make_pair(2147483627, -1));
  EXPECT_EQ(qm(0.50 - 1e-10), std::make_pair(1073741824, 0));  // rounds to 2^31: halved, exponent + 1
  EXPECT_EQ(qm(0.50), std::make_pair(1073741824, 0));
  EXPECT_EQ(qm(0.75), std::make_pair(1610612736, 0));
  EXPECT_EQ(qm(1 - 1e-9), std::make_pair(2147483646, 0));
  EXPECT_EQ(qm(1 + 1e-11), std::make_pair(1073741824, 1));
  EXPECT_EQ(qm(1.25), std::make_pair(1342177280, 1));
  EXPECT_EQ(qm(1.75), std::make_pair(1879048192, 1));
  EXPECT_EQ(qm(2 - 1e-9), std::make_pair(2147483647, 1));
  EXPECT_EQ(qm(2), std::make_pair(1073741824, 2));
  EXPECT_EQ(qm(0.125), std::make_pair(1073741824, -2));
  EXPECT_EQ(qm(4), std::make_pair(1073741824, 3));
  EXPECT_EQ(qm(0), std::make_pair(0, 0));
  EXPECT_EQ(qm(std::ldexp(1.0f, -31)), std::make_pair(1073741824, -30));
  EXPECT_EQ(qm(std::ldexp(1.0f, -32)), std::make_pair(1073741824, -31));
  EXPECT_EQ(qm(std::ldexp(0.99f, -32)), std::make_pair(0, 0));
  EXPECT_EQ(qm(std::ldexp(1.0f, -33)), std::make_pair(0, 0));
  EXPECT_THROW(quantize_multiplier(-0.1), qfx::DataError);
  EXPECT_THROW(quantize_multiplier(NAN), qfx::DataError);
  EXPECT_THROW(quantize_multiplier(0.5, 33), qfx::DataError);
  // A 16-bit multiplier: Q15 mantissa.
  EXPECT_EQ(quantize_multiplier(0.75, 16).multiplier, 24576);
  EXPECT_EQ(quantize_multiplier(0.75, 16).shift, 0);
}

// quantization_util_test.cc MultiplyByQuantizedMultiplierInt32 (double rounding, TFLite's default).
TEST(Arithmetic, MultiplyByQuantizedMultiplierMatchesTfLite) {
  EXPECT_EQ(mbqm(0, 0.1), 0);
  EXPECT_EQ(mbqm(1, 0), 0);
  EXPECT_EQ(mbqm(10000, 0.00097656), 10);
  EXPECT_EQ(mbqm(-10000, 0.00097656), -10);
  EXPECT_EQ(mbqm(kMin, 0.00001), -21475);
  EXPECT_EQ(mbqm(kMax, 0.00001), 21475);
  // Largest x and multiplier, shift -3: round(x * M / 2^34), ties away from zero.
  const QuantizedMultiplier q{kMax, -3};
  const int32_t expected = static_cast<int32_t>(std::round(static_cast<double>(kMax) * kMax / std::ldexp(1.0, 34)));
  EXPECT_EQ(multiply_by_quantized_multiplier(kMax, q, 32, Rounding::kHalfAwayFromZero), expected);
  EXPECT_EQ(multiply_by_quantized_multiplier(-kMax, q, 32, Rounding::kHalfAwayFromZero), -expected);
}

// gemmlowp/fixedpoint/fixedpoint.h: SaturatingRoundingDoublingHighMul's one
// overflow case and its rounding (its nudge 1 - 2^30 for negative products rounds
// ties toward +infinity: -1.5 -> -1); RoundingDivideByPOT (ties away from zero).
TEST(Arithmetic, GemmlowpPrimitives) {
  EXPECT_EQ(rounding_high_mul(kMin, kMin), kMax);
  EXPECT_EQ(rounding_high_mul(kMax, kMax), kMax - 1);  // (2^31-1)^2 / 2^31 = 2^31 - 2 + 2^-31
  EXPECT_EQ(rounding_high_mul(1 << 30, 3), 2);           // 1.5 -> 2
  EXPECT_EQ(rounding_high_mul(-(1 << 30), 3), -1);       // -1.5 -> -1
  EXPECT_EQ(rounding_high_mul(1 << 30, 1), 1);           // 0.5 -> 1
  EXPECT_EQ(rounding_high_mul(-(1 << 30), 1), 0);        // -0.5 -> 0
  EXPECT_EQ(rounding_high_mul(-(1 << 30) - 1, 1), -1);   // just below -0.5 -> -1
  EXPECT_EQ(rounding_shift_right(5, 1, Rounding::kHalfAwayFromZero), 3);
  EXPECT_EQ(rounding_shift_right(-5, 1, Rounding::kHalfAwayFromZero), -3);
  EXPECT_EQ(rounding_shift_right(-6, 2, Rounding::kHalfAwayFromZero), -2);
  EXPECT_EQ(rounding_shift_right(-7, 2, Rounding::kHalfAwayFromZero), -2);
  EXPECT_EQ(rounding_shift_right(5, 1, Rounding::kHalfEven), 2);
  EXPECT_EQ(rounding_shift_right(7, 1, Rounding::kHalfEven), 4);
  EXPECT_EQ(rounding_shift_right(-5, 1, Rounding::kHalfEven), -2);
  EXPECT_EQ(rounding_shift_right(-5, 1, Rounding::kHalfUp), -2);
  EXPECT_EQ(rounding_shift_right(5, 1, Rounding::kHalfUp), 3);
  EXPECT_EQ(rounding_shift_right(kMin, 31, Rounding::kHalfAwayFromZero), -1);
  EXPECT_EQ(rounding_shift_right(12345, 80, Rounding::kHalfUp), 0);
}

TEST(Arithmetic, AccumulatorLimits) {
  EXPECT_EQ(limit_accumulator((1 << 23) + 5, 24, Overflow::kSaturate), (1 << 23) - 1);
  EXPECT_EQ(limit_accumulator(-(1 << 23) - 5, 24, Overflow::kSaturate), -(1 << 23));
  EXPECT_EQ(limit_accumulator((1 << 23) + 5, 24, Overflow::kWrap), -(1 << 23) + 5);
  EXPECT_EQ(limit_accumulator(-(1 << 23) - 1, 24, Overflow::kWrap), (1 << 23) - 1);
  EXPECT_EQ(limit_accumulator(40000, 16, Overflow::kWrap), 40000 - 65536);
  // 32 bits: the int32 accumulator of ONNX's integer ops, two's complement whatever the
  // overflow setting (ONNX Runtime adds the int32 bias so).
  EXPECT_EQ(limit_accumulator(int64_t{1} << 40, 32, Overflow::kWrap), 0);
  EXPECT_EQ(limit_accumulator(int64_t{kMax} + 1, 32, Overflow::kSaturate), kMin);
  EXPECT_EQ(limit_accumulator(int64_t{kMin} - 1, 32, Overflow::kSaturate), kMax);
  EXPECT_EQ(limit_accumulator(int64_t{kMax} + 32385, 32, Overflow::kWrap), kMin + 32384);
  EXPECT_EQ(limit_accumulator(kMin, 32, Overflow::kSaturate), kMin);
  EXPECT_EQ(limit_accumulator(-1234, 16, Overflow::kSaturate), -1234);
}

// Property: a 32-bit fixed-point multiplier lands within one unit of ONNX's float
// requantization; a 16-bit one within a bound that follows from its precision.
TEST(Arithmetic, FixedPointWithinOneUnitOfFloat) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> logm(-20.0, 0.0);
  std::uniform_int_distribution<int32_t> accd(kMin, kMax);
  int differ = 0;
  for (int t = 0; t < 200000; ++t) {
    const float m = static_cast<float>(std::exp2(logm(rng)));
    int32_t acc = accd(rng);
    // Keep |acc * m| below 2^16 (an int16 code's range): float(acc) is exact enough there.
    const double lim = 65536.0 / m;
    if (std::abs(static_cast<double>(acc)) > lim) acc = static_cast<int32_t>(std::fmod(static_cast<double>(acc), lim));
    const Requantizer fl(RequantMode::kFloat, 32, Rounding::kHalfEven, 32, Overflow::kSaturate, {m}, "t");
    const Requantizer fx(RequantMode::kFixedPoint, 32, Rounding::kHalfAwayFromZero, 32, Overflow::kSaturate, {m}, "t");
    const int32_t a = fl.scaled(acc, 0), b = fx.scaled(acc, 0);
    ASSERT_LE(std::abs(a - b), 1) << "acc " << acc << " m " << m;
    differ += a != b;
  }
  // Double rounding and the rounded multiplier make some ties differ, not many.
  EXPECT_GT(differ, 0);
  EXPECT_LT(differ, 200000 / 10);
}

// Property: with power-of-two multipliers, `shift` (half-even rounding) equals ONNX's
// float requantization exactly for accumulators float represents exactly (|acc| <= 2^24).
TEST(Arithmetic, ShiftEqualsFloatForPowerOfTwoScales) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int32_t> accd(-(1 << 24), 1 << 24);
  std::uniform_int_distribution<int> kd(-4, 20);
  for (int t = 0; t < 200000; ++t) {
    const float m = std::ldexp(1.0f, -kd(rng));
    const int32_t acc = accd(rng);
    const Requantizer fl(RequantMode::kFloat, 32, Rounding::kHalfEven, 32, Overflow::kSaturate, {m}, "t");
    const Requantizer sh(RequantMode::kShift, 32, Rounding::kHalfEven, 32, Overflow::kSaturate, {m}, "t");
    ASSERT_EQ(fl.code(acc, 0, 3, -128, 127), sh.code(acc, 0, 3, -128, 127)) << "acc " << acc << " m " << m;
  }
  EXPECT_THROW(Requantizer(RequantMode::kShift, 32, Rounding::kHalfUp, 32, Overflow::kSaturate, {0.3f}, "conv1"),
               qfx::DataError);
  try {
    Requantizer(RequantMode::kShift, 32, Rounding::kHalfUp, 32, Overflow::kSaturate, {0.3f}, "QLinearConv 'conv1'");
  } catch (const qfx::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("QLinearConv 'conv1'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("power-of-two"), std::string::npos) << e.what();
  }
}

TEST(Arithmetic, JsonRoundTripAndErrors) {
  Arithmetic a;
  EXPECT_TRUE(a.is_float());
  a.requantize = RequantMode::kFixedPoint;
  a.multiplier_bits = 16;
  a.rounding = Rounding::kHalfUp;
  a.accumulator_bits = 24;
  a.overflow = Overflow::kWrap;
  a.elementwise = RequantMode::kShift;
  a.elementwise_left_shift = 8;
  a.lut = {"Sigmoid", "HardSwish"};
  a.softmax_fixed_point = true;
  const Arithmetic b = Arithmetic::from_json(a.to_json(), "m.onnx");
  EXPECT_EQ(b.to_json(), a.to_json());
  EXPECT_FALSE(b.is_float());
  EXPECT_TRUE(b.softmax_fixed_point);
  EXPECT_FALSE(Arithmetic::from_json(Arithmetic{}.to_json(), "m.onnx").softmax_fixed_point) << "absent: float";
  Arithmetic only_softmax;
  only_softmax.softmax_fixed_point = true;
  EXPECT_FALSE(only_softmax.is_float());
  auto message = [](const std::string& json) {
    try {
      Arithmetic::from_json(json, "m.onnx");
    } catch (const qfx::DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{\"requantize\": \"fixed\"}").find("arithmetic.requantize 'fixed' is not one of"), std::string::npos);
  EXPECT_NE(message("{\"bogus\": 1}").find("unknown arithmetic key 'bogus'"), std::string::npos);
  EXPECT_NE(message("{\"accumulator_bits\": 40}").find("accumulator_bits = 40"), std::string::npos);
  EXPECT_NE(message("{\"lut\": [\"Softmax\"]}").find("lut op 'Softmax'"), std::string::npos);
  EXPECT_NE(message("{\"rounding\": \"half_up\"}").find("no effect with float"), std::string::npos);
  EXPECT_NE(message("[1, 2").find("not JSON"), std::string::npos);
  EXPECT_NE(message("{\"softmax\": \"table\"}").find("arithmetic.softmax 'table' is not one of float, fixed_point"), std::string::npos);
  EXPECT_NE(message("{\"softmax\": \"fixed_point\", \"integer_only\": [\"Softmax\"]}").find("keep one"), std::string::npos);
  EXPECT_NE(message("{\"multiplier_bits\": \"x\"}").find("must be an integer"), std::string::npos);
}
