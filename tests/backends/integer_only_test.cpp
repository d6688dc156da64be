// Integer-only GELU, softmax and layer normalisation (qfx/runtime/integer_only.h).
// IntegerOnly.*: the integer primitives against exact arithmetic and properties of
// the ops. IntegerOnlyReference.*: the runtime's codes against an independent Python
// implementation of I-BERT's algorithms (tools/fixtures/integer_only_reference.py),
// bit for bit on every backend, and within 2 codes of ONNX Runtime's float group.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "qfx/error.h"
#include "qfx/runtime/integer_only.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/npy.h"
#include "qfx/runtime/registry.h"

namespace io = qfx::runtime::integer_only;
using qfx::runtime::DType;
using qfx::runtime::Rounding;
using qfx::runtime::Tensor;

TEST(IntegerOnly, IsqrtIsTheFloorOfTheSquareRoot) {
  for (int64_t n = 0; n < (1 << 20); ++n) {
    const int64_t r = io::isqrt(n);
    ASSERT_TRUE(r * r <= n && (r + 1) * (r + 1) > n) << n;
  }
  std::mt19937_64 rng(3);
  for (int k = 0; k < 100000; ++k) {
    const int64_t n = static_cast<int64_t>(rng() >> (1 + rng() % 62));
    const __int128 r = io::isqrt(n);
    ASSERT_TRUE(r * r <= n && (r + 1) * (r + 1) > n) << n;
  }
}

// rescale(acc, make_rescale(m)) is acc * m rounded as asked, up to the 31-bit
// multiplier's relative error (2^-31): exact wherever acc * m is not within that of a tie.
TEST(IntegerOnly, RescaleRoundsTheProduct) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> log_m(-40.0, 10.0);
  int checked = 0;
  for (int k = 0; k < 200000; ++k) {
    const double m = std::exp2(log_m(rng));
    const int64_t acc = static_cast<int64_t>(rng() % (int64_t{1} << 40)) - (int64_t{1} << 39);
    const long double exact = static_cast<long double>(acc) * m;
    if (std::fabs(exact) > 2.0e9) continue;
    const long double frac = exact - std::floor(exact);
    if (std::fabs(frac - 0.5L) < 1e-6L * std::max<long double>(1, std::fabs(exact))) continue;  // near a tie
    const auto want = static_cast<int64_t>(std::floor(exact + 0.5L));
    for (Rounding r : {Rounding::kHalfEven, Rounding::kHalfUp, Rounding::kHalfAwayFromZero})
      ASSERT_EQ(io::rescale(acc, io::make_rescale(m, "test"), r), want) << acc << " * " << m;
    ++checked;
  }
  EXPECT_GT(checked, 50000);
  EXPECT_THROW(io::make_rescale(0.0, "test"), qfx::DataError);
  EXPECT_THROW(io::make_rescale(std::ldexp(1.0, 31), "test"), qfx::DataError);
}

TEST(IntegerOnly, WorkingGridIsAtLeastTwoToTheTenFine) {
  for (double s : {1e-6, 1e-3, 0.0009765625, 0.001, 0.05, 0.4, 3.0, 100.0}) {
    const int k = io::working_shift(s);
    EXPECT_LE(std::ldexp(s, -k), 1.0 / 1024.0) << s;
    EXPECT_TRUE(k == 0 || std::ldexp(s, -(k - 1)) > 1.0 / 1024.0) << s;
  }
}

// Softmax of a row of equal codes is uniform; of one large code, that code takes (almost) all.
TEST(IntegerOnly, SoftmaxRowsSumToOne) {
  const io::Softmax s = io::make_softmax(0.1, 1.0 / 256, 0, 0, 255, Rounding::kHalfEven, "test");
  int64_t scratch[8];
  int8_t x[8] = {5, 5, 5, 5, 5, 5, 5, 5};
  uint8_t y[8];
  io::softmax_row(x, y, 8, 1, s, scratch);
  for (uint8_t v : y) EXPECT_EQ(v, 32);  // 1/8 on a 1/256 grid
  int8_t peak[8] = {127, -128, -128, -128, -128, -128, -128, -128};
  io::softmax_row(peak, y, 8, 1, s, scratch);
  EXPECT_EQ(y[0], 255);
  for (int i = 1; i < 8; ++i) EXPECT_EQ(y[i], 0);
}

// A constant row normalises to zero: every output is beta's code; gamma = 0 gives beta too.
TEST(IntegerOnly, LayerNormOfAConstantRowIsTheBias) {
  const std::vector<float> gamma = {1.5f, -0.5f, 0.0f, 2.0f}, beta = {0.25f, -0.5f, 1.0f, 0.0f};
  const io::LayerNorm ln =
      io::make_layer_norm(4, 0.05, 3, 1e-5, gamma, beta, 0.025, -2, -128, 127, Rounding::kHalfEven, "test");
  int8_t x[4] = {40, 40, 40, 40};
  int8_t y[4];
  int64_t scratch[4];
  io::layer_norm_row(x, y, ln, scratch);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(y[j], static_cast<int8_t>(std::nearbyint(beta[j] / 0.025) - 2)) << j;
}

TEST(IntegerOnly, GeluOfZeroIsTheOutputZeroPoint) {
  const io::Gelu g = io::make_gelu(0.05, 7, 0.03, -20, -128, 127, Rounding::kHalfEven, "test");
  EXPECT_EQ(io::gelu(7, g), -20);
  EXPECT_THROW(io::make_gelu(1e-7, 0, 0.03, 0, -128, 127, Rounding::kHalfEven, "test"), qfx::DataError);
}

namespace {

std::string fixture(const std::string& name) { return std::string(QFX_FIXTURE_DIR) + "/integer_only/" + name; }

// Element i of an int8 / uint8 tensor.
int32_t code(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kUInt8 ? t.data<uint8_t>()[i] : t.dtype() == DType::kInt8 ? t.data<int8_t>()[i]
                                                                                        : static_cast<int32_t>(t.data<int64_t>()[i]);
}

}  // namespace

class IntegerOnlyReference : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(IntegerOnlyReference, EqualsThePapersAlgorithmsBitForBit) {
  const std::string name = std::get<0>(GetParam()), fused = std::get<1>(GetParam());
  const Tensor x = qfx::runtime::load_npy(fixture(name + ".in.npy"));
  const Tensor want = qfx::runtime::load_npy(fixture(name + ".expected.npy"));
  const Tensor ort_float = qfx::runtime::load_npy(fixture(name + ".float.npy"));
  for (const char* backend : {"reference", "onednn"}) {
    const auto model = qfx::runtime::Model::load(fixture(name + ".onnx"), qfx::runtime::ModelOptions(backend));
    int replaced = 0;
    for (const auto& k : model.kernel_report()) replaced += k.op == fused;
    ASSERT_EQ(replaced, 1) << name << " on " << backend << ": the group was not replaced by " << fused;
    const Tensor y = model.run({{"x", x}}).at("y");
    ASSERT_EQ(y.numel(), want.numel());
    int64_t equal = 0, max_diff = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      ASSERT_EQ(code(y, i), code(want, i)) << name << " on " << backend << ", element " << i;
      const int64_t d = std::abs(code(y, i) - code(ort_float, i));
      max_diff = std::max(max_diff, d);
      equal += d == 0;
    }
    EXPECT_LE(max_diff, 2) << name << ": integer-only vs ONNX Runtime's float group";
    std::printf("%s on %s: %lld of %lld codes equal ONNX Runtime's float group, max difference %lld\n", name.c_str(),
                backend, static_cast<long long>(equal), static_cast<long long>(y.numel()),
                static_cast<long long>(max_diff));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, IntegerOnlyReference,
                         ::testing::Values(std::make_tuple("gelu_s8", "QIntGelu"), std::make_tuple("gelu_s8_coarse", "QIntGelu"),
                                           std::make_tuple("gelu_u8", "QIntGelu"),
                                           std::make_tuple("softmax_last", "QIntSoftmax"),
                                           std::make_tuple("softmax_axis1", "QIntSoftmax"),
                                           std::make_tuple("layer_norm_opset14", "QIntLayerNorm"),
                                           std::make_tuple("layer_norm_opset17", "QIntLayerNorm")),
                         [](const auto& info) { return std::get<0>(info.param); });
