// The reference kernels of elementwise ONNX ops across dtypes, each against values
// worked out by hand from the ONNX operator spec (or the std:: function it names):
// integer arithmetic, Mod, Min / Max, comparisons and Where, Cast between every pair
// of dtypes, the unary math functions, Round, IsNaN / IsInf and the Bitwise ops.
#include <cmath>

#include "op_test_util.h"

namespace qfx::runtime {
namespace {
using namespace test;

TEST(OnnxOps, IntegerArithmeticBroadcastsTruncatesAndWraps) {
  for (DType dt : {DType::kInt64, DType::kInt32}) {
    const Tensor a = make(dt, {2, 3}, {-7, 7, 0, 9, -9, 4}), b = make(dt, {3}, {2, -2, 3});
    EXPECT_EQ(values(run_op(op_node("Add", 2), {a, b})[0]), (V{-5, 5, 3, 11, -11, 7}));
    EXPECT_EQ(values(run_op(op_node("Sub", 2), {a, b})[0]), (V{-9, 9, -3, 7, -7, 1}));
    EXPECT_EQ(values(run_op(op_node("Mul", 2), {a, b})[0]), (V{-14, -14, 0, 18, 18, 12}));
    EXPECT_EQ(values(run_op(op_node("Div", 2), {a, b})[0]), (V{-3, -3, 0, 4, 4, 1}));  // toward zero
    EXPECT_EQ(run_op(op_node("Div", 2), {a, b})[0].dtype(), dt);
    const Tensor base = make(dt, {5}, {3, -2, 2, -1, 1}), e = make(dt, {5}, {4, 3, -1, -3, -5});
    EXPECT_EQ(values(run_op(op_node("Pow", 2), {base, e})[0]), (V{81, -8, 0, -1, 1}));
  }
  // int64 wraps around as two's complement; min / -1 is min.
  const Tensor big = i64v({3}, {kMax, kMin, kMin}), one = i64v({3}, {1, -1, -1});
  const Tensor sum = run_op(op_node("Add", 2), {big, one})[0];
  EXPECT_EQ(sum.data<int64_t>()[0], kMin);
  EXPECT_EQ(sum.data<int64_t>()[1], kMax);
  EXPECT_EQ(run_op(op_node("Div", 2), {big, one})[0].data<int64_t>()[2], kMin);
  EXPECT_NE(error_of<DataError>([] { run_op(op_node("Div", 2), {i64({2}, {1, 2}), i64({1}, {0})}); }).find("division by zero"),
            std::string::npos);
  EXPECT_NE(error_of<UnsupportedOpError>([] { run_op(op_node("Add", 2), {i64({1}, {1}), i32({1}, {1})}); }).find("different dtypes"),
            std::string::npos);
}

TEST(OnnxOps, FloatArithmeticAndPowWithAnIntegerExponent) {
  const Tensor x = f32({2, 2}, {1.5, -2, 4, 0.25}), y = f32({2}, {2, -0.5});
  EXPECT_EQ(values(run_op(op_node("Add", 2), {x, y})[0]), (V{3.5, -2.5, 6, -0.25}));
  EXPECT_EQ(values(run_op(op_node("Div", 2), {x, y})[0]), (V{0.75, 4, 2, -0.5}));
  EXPECT_EQ(values(run_op(op_node("Pow", 2), {x, i64({2}, {2, 3})})[0]), (V{2.25, -8, 16, 0.015625}));
}

TEST(OnnxOps, ModFollowsTheDivisorsSignOrCsFmod) {
  const Tensor a = i64({4}, {-7, 7, -7, 6}), b = i64({4}, {3, -3, -3, 3});
  ir::Node n = op_node("Mod", 2);
  EXPECT_EQ(values(run_op(n, {a, b})[0]), (V{2, -2, -1, 0}));  // Python: -7 % 3 = 2, 7 % -3 = -2
  set_i(n, "fmod", 1);
  EXPECT_EQ(values(run_op(n, {a, b})[0]), (V{-1, 1, -1, 0}));  // C: sign of the dividend
  EXPECT_EQ(values(run_op(n, {f32({2}, {-7.5, 7.5}), f32({1}, {2})})[0]), (V{std::fmod(-7.5, 2.0), std::fmod(7.5, 2.0)}));
  EXPECT_NE(error_of<UnsupportedOpError>([] { run_op(op_node("Mod", 2), {f32({1}, {1}), f32({1}, {2})}); }).find("fmod 0 on float32"),
            std::string::npos);
  EXPECT_NE(error_of<DataError>([&] { run_op(n, {i32({1}, {1}), i32({1}, {0})}); }).find("Mod by zero"), std::string::npos);
}

TEST(OnnxOps, MinAndMaxAreVariadicBroadcastAndKeepInt64Ends) {
  const Tensor a = i64v({2, 2}, {kMax, -3, 5, kMin}), b = i64({2}, {0, 1}), c = i64({1}, {2});
  EXPECT_EQ(run_op(op_node("Max", 3), {a, b, c})[0].data<int64_t>()[0], kMax);
  EXPECT_EQ(values(run_op(op_node("Max", 3), {a, b, c})[0])[1], 2);
  EXPECT_EQ(run_op(op_node("Min", 3), {a, b, c})[0].data<int64_t>()[3], kMin);
  EXPECT_EQ(values(run_op(op_node("Min", 2), {i32({3}, {4, -1, 0}), i32({3}, {2, 2, 2})})[0]), (V{2, -1, 0}));
  const Tensor m = run_op(op_node("Max", 2), {f32({3}, {1, NAN, -1}), f32({3, 1}, {0, 2, NAN})})[0];
  ASSERT_EQ(m.shape(), (Shape{3, 3}));
  EXPECT_EQ(at(m, 0), 1);
  EXPECT_TRUE(std::isnan(at(m, 1)));  // NaN propagates
  EXPECT_TRUE(std::isnan(at(m, 6)));
  EXPECT_EQ(values(run_op(op_node("Min", 1), {f32({2}, {3, -4})})[0]), (V{3, -4}));  // one input: itself
}

TEST(OnnxOps, ComparisonsOnIntegersAndBoolAndWhereOnAnyDtype) {
  const Tensor a = i64v({2, 2}, {kMin, 0, 5, kMax}), b = i64v({2}, {0, kMax});
  EXPECT_EQ(values(run_op(op_node("Less", 2), {a, b})[0]), (V{1, 1, 0, 0}));
  EXPECT_EQ(values(run_op(op_node("GreaterOrEqual", 2), {a, b})[0]), (V{0, 0, 1, 1}));
  EXPECT_EQ(values(run_op(op_node("Equal", 2), {i32({3}, {1, 2, 3}), i32({1}, {2})})[0]), (V{0, 1, 0}));
  EXPECT_EQ(values(run_op(op_node("Equal", 2), {boolean({2}, {1, 0}), boolean({2}, {1, 1})})[0]), (V{1, 0}));
  EXPECT_NE(error_of<UnsupportedOpError>([] { run_op(op_node("Less", 2), {boolean({1}, {1}), boolean({1}, {0})}); }).find("takes float32"),
            std::string::npos);
  const Tensor cond = boolean({2, 1}, {1, 0});
  EXPECT_EQ(values(run_op(op_node("Where", 3), {cond, i64({2}, {1, 2}), i64({1}, {-9})})[0]), (V{1, 2, -9, -9}));
  EXPECT_EQ(values(run_op(op_node("Where", 3), {cond, boolean({1}, {1}), boolean({2}, {0, 0})})[0]), (V{1, 1, 0, 0}));
  EXPECT_EQ(values(run_op(op_node("Where", 3), {cond, f32({1}, {0.5}), f32({2}, {-1, -2})})[0]), (V{0.5, 0.5, -1, -2}));
  EXPECT_EQ(values(run_op(op_node("Xor", 2), {boolean({4}, {0, 0, 1, 1}), boolean({4}, {0, 1, 0, 1})})[0]), (V{0, 1, 1, 0}));
}

TEST(OnnxOps, NegAbsSignOnIntegers) {
  const Tensor x = i64v({4}, {-5, 0, 7, kMin});
  const Tensor neg = run_op(op_node("Neg", 1), {x})[0];
  EXPECT_EQ(neg.data<int64_t>()[0], 5);
  EXPECT_EQ(neg.data<int64_t>()[3], kMin);  // wraps, as two's complement
  EXPECT_EQ(values(run_op(op_node("Abs", 1), {i32({3}, {-5, 0, 7})})[0]), (V{5, 0, 7}));
  EXPECT_EQ(values(run_op(op_node("Sign", 1), {x})[0]), (V{-1, 0, 1, -1}));
  EXPECT_NE(error_of<UnsupportedOpError>([] { run_op(op_node("Exp", 1), {i64({1}, {1})}); }).find("only float32"), std::string::npos);
}

// Every pair of float32, int64, int32, int16, int8, uint8 and bool on values every type
// holds, then the conversions the spec pins down: truncation toward zero, x != 0.
TEST(OnnxOps, CastBetweenEveryPairOfDtypes) {
  const std::vector<std::pair<DType, int64_t>> types = {{DType::kFloat32, 1}, {DType::kUInt8, 2}, {DType::kInt8, 3}, {DType::kInt16, 5},
                                                        {DType::kInt32, 6},   {DType::kInt64, 7}, {DType::kBool, 9}};
  for (const auto& [from, from_code] : types)
    for (const auto& [to, to_code] : types) {
      const bool from_bool = from == DType::kBool;
      const V in = from_bool ? V{0, 1, 1, 0} : V{0, 1, 5, 100};
      ir::Node n = op_node("Cast", 1);
      set_i(n, "to", to_code);
      const Tensor y = run_op(n, {make(from, {4}, in)})[0];
      ASSERT_EQ(y.dtype(), to) << from_code << " -> " << to_code;
      V want = in;
      if (to == DType::kBool)
        for (auto& v : want) v = v != 0;
      EXPECT_EQ(values(y), want) << from_code << " -> " << to_code;
    }
  ir::Node to_int = op_node("Cast", 1), to_bool = op_node("Cast", 1), to_u8 = op_node("Cast", 1);
  set_i(to_int, "to", 7);
  set_i(to_bool, "to", 9);
  set_i(to_u8, "to", 2);
  EXPECT_EQ(values(run_op(to_int, {f32({4}, {-2.7, 2.7, -0.5, 1e10})})[0]), (V{-2, 2, 0, 1e10}));
  EXPECT_EQ(values(run_op(to_bool, {f32({3}, {0.5, 0, -0.0})})[0]), (V{1, 0, 0}));
  EXPECT_EQ(values(run_op(to_u8, {i64({2}, {300, -1})})[0]), (V{44, 255}));  // the low 8 bits
  ir::Node bad = op_node("Cast", 1);
  set_i(bad, "to", 10);  // float16
  EXPECT_NE(error_of<UnsupportedOpError>([&] { run_op(bad, {f32({1}, {1})}); }).find("Cast to ONNX type 10"), std::string::npos);
}

TEST(OnnxOps, UnaryMathIsTheStdFunction) {
  const std::vector<std::pair<const char*, double (*)(double)>> fns = {
      {"Tan", [](double x) { return std::tan(x); }},     {"Asin", [](double x) { return std::asin(x); }},
      {"Acos", [](double x) { return std::acos(x); }},   {"Atan", [](double x) { return std::atan(x); }},
      {"Sinh", [](double x) { return std::sinh(x); }},   {"Cosh", [](double x) { return std::cosh(x); }},
      {"Asinh", [](double x) { return std::asinh(x); }}, {"Atanh", [](double x) { return std::atanh(x); }}};
  const V xs = {-0.9, -0.3, 0, 0.45, 0.8};
  for (const auto& [op, f] : fns) {
    const Tensor y = run_op(op_node(op, 1), {f32({5}, xs)})[0];
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(at(y, static_cast<int64_t>(i)), f(static_cast<float>(xs[i])), 2e-6) << op << " " << xs[i];
  }
  const Tensor ac = run_op(op_node("Acosh", 1), {f32({3}, {1, 2, 10})})[0];
  EXPECT_NEAR(at(ac, 1), std::acosh(2.0), 1e-6);
  EXPECT_NEAR(at(ac, 2), std::acosh(10.0), 1e-6);
  EXPECT_TRUE(std::isnan(at(run_op(op_node("Asin", 1), {f32({1}, {2})})[0], 0)));  // outside the domain
}

TEST(OnnxOps, RoundIsHalfToEvenAndIsNanIsInfFlagValues) {
  EXPECT_EQ(values(run_op(op_node("Round", 1), {f32({7}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6})})[0]), (V{0, 2, 2, -0.0, -2, 2, -3}));
  const Tensor x = f32({4}, {1, NAN, INFINITY, -INFINITY});
  EXPECT_EQ(values(run_op(op_node("IsNaN", 1), {x})[0]), (V{0, 1, 0, 0}));
  EXPECT_EQ(values(run_op(op_node("IsInf", 1), {x})[0]), (V{0, 0, 1, 1}));
  ir::Node pos_only = op_node("IsInf", 1);
  set_i(pos_only, "detect_negative", 0);
  const Tensor y = run_op(pos_only, {x})[0];
  EXPECT_EQ(y.dtype(), DType::kBool);
  EXPECT_EQ(values(y), (V{0, 0, 1, 0}));
}

TEST(OnnxOps, BitwiseOpsOnSignedAndUnsignedIntegers) {
  const Tensor a = i32({3}, {12, -1, 0}), b = i32({1}, {10});
  EXPECT_EQ(values(run_op(op_node("BitwiseAnd", 2), {a, b})[0]), (V{8, 10, 0}));
  EXPECT_EQ(values(run_op(op_node("BitwiseOr", 2), {a, b})[0]), (V{14, -1, 10}));
  EXPECT_EQ(values(run_op(op_node("BitwiseXor", 2), {a, b})[0]), (V{6, -11, 10}));
  EXPECT_EQ(values(run_op(op_node("BitwiseNot", 1), {a})[0]), (V{-13, 0, -1}));
  EXPECT_EQ(values(run_op(op_node("BitwiseNot", 1), {make(DType::kUInt8, {2}, {0, 15})})[0]), (V{255, 240}));
  EXPECT_EQ(values(run_op(op_node("BitwiseXor", 2), {i64v({1}, {kMax}), i64v({1}, {-1})})[0]), (V{static_cast<double>(kMin)}));
  EXPECT_NE(error_of<UnsupportedOpError>([] { run_op(op_node("BitwiseAnd", 2), {f32({1}, {1}), f32({1}, {1})}); }).find("takes int64"),
            std::string::npos);
}

}  // namespace
}  // namespace qfx::runtime
