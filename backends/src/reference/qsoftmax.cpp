// QLinearSoftmax: 8-bit Softmax along `axis` as TFLite's reference int8 SOFTMAX
// computes it (Arithmetic::softmax_fixed_point; LiteRT's reference_ops::Softmax, the
// kernel TFLite Micro, CMSIS-NN and Arm's Ethos-U also follow). Fixed-point values
// are int32 with `ib` integer bits (Q ib.(31-ib)), multiplied and rounded as
// gemmlowp's fixedpoint library does: exp by a Taylor polynomial on [-1/4, 0) and a
// barrel shifter of exp(-2^k) constants, the reciprocal of the sum by Newton-Raphson.
#include <cmath>

#include "common.h"

namespace qfx::runtime {
namespace ref {
namespace {

constexpr int32_t kQ0One = std::numeric_limits<int32_t>::max();  // gemmlowp's One() with 0 integer bits

// Q(a) * Q(b) -> Q(a + b): SaturatingRoundingDoublingHighMul.
int32_t fx_mul(int32_t a, int32_t b) { return hd::rounding_high_mul(a, b, 32); }
// x / 2^e rounded half away from zero: RoundingDivideByPOT.
int32_t fx_div_pot(int32_t x, int e) {
  return static_cast<int32_t>(hd::rounding_shift_right_in<Rounding::kHalfAwayFromZero, int64_t>(x, e));
}
// x * 2^e saturated to int32 (e > 0): SaturatingRoundingMultiplyByPOT with a positive exponent.
int32_t fx_mul_pot(int32_t x, int e) { return hd::sat32(static_cast<int64_t>(x) * (int64_t{1} << e)); }

// exp(a) for a in [-1/4, 0), Q0 in and out: the Taylor series around -1/8 to x^4.
int32_t exp_quarter(int32_t a) {
  const int32_t exp_minus_eighth = 1895147668, third = 715827883;  // exp(-1/8), 1/3 in Q0.31
  const int32_t x = a + (1 << 28);                                  // a + 1/8
  const int32_t x2 = fx_mul(x, x), x3 = fx_mul(x2, x), x4 = fx_mul(x2, x2);
  const int32_t poly = fx_div_pot(fx_mul(fx_div_pot(x4, 2) + x3, third) + x2, 1);  // x^4/24 + x^3/6 + x^2/2
  return exp_minus_eighth + fx_mul(exp_minus_eighth, x + poly);
}

// exp(a) for a <= 0 in Q5.26, Q0 out: exp of a's offset within its quarter, times
// exp(-2^k) for each bit k of the rest (k = -2 .. 4).
int32_t exp_negative(int32_t a) {
  constexpr int kFrac = 26;
  constexpr int32_t kQuarter = 1 << (kFrac - 2);
  static constexpr int32_t kExpMinusPow2[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
  const int32_t offset = (a & (kQuarter - 1)) - kQuarter;  // in [-1/4, 0)
  int32_t result = exp_quarter(fx_mul_pot(offset, 5));     // Q5 -> Q0
  const int32_t rest = offset - a;
  for (int k = 0; k < 7; ++k)
    if (rest & (1 << (kFrac - 2 + k))) result = fx_mul(result, kExpMinusPow2[k]);
  return a == 0 ? kQ0One : result;
}

// 1 / (1 + a) for a in [0, 1), Q0 in and out: three Newton-Raphson steps on the
// half denominator from 48/17 - 32/17 d, in Q2.29.
int32_t one_over_one_plus(int32_t a) {
  const int64_t sum = static_cast<int64_t>(a) + kQ0One;
  const int32_t half_den = static_cast<int32_t>((sum + (sum >= 0 ? 1 : -1)) / 2);  // RoundingHalfSum(a, 1)
  int32_t x = 1515870810 + fx_mul(half_den, -1010580540);                        // 48/17 - 32/17 d
  for (int i = 0; i < 3; ++i) x += fx_mul_pot(fx_mul(x, (1 << 29) - fx_mul(half_den, x)), 2);
  return fx_mul_pot(x, 1);  // x / 2 in Q1 is x's raw; to Q0
}

// The reciprocal of a positive Q12 sum, Q0, scaled by 2^-bits_over_unit (TFLite's GetReciprocal).
int32_t reciprocal(int32_t sum, int* bits_over_unit) {
  const int lead = __builtin_clz(static_cast<uint32_t>(sum));
  *bits_over_unit = 12 - lead;
  const auto shifted_minus_one = static_cast<int32_t>((static_cast<uint32_t>(sum) << lead) - (uint32_t{1} << 31));
  return one_over_one_plus(shifted_minus_one);
}

/// The input-side constants TFLite's Prepare derives from the input scale (beta 1).
struct SoftmaxScaling {
  QuantizedMultiplier diff;  ///< code difference -> Q5.26 (PreprocessSoftmaxScaling)
  int32_t diff_min = 0;      ///< smaller differences contribute 0 (-CalculateInputRadius)
};

SoftmaxScaling softmax_scaling(const Node& n, float input_scale) {
  const double real = std::min(static_cast<double>(input_scale) * static_cast<double>(1 << 26), (1LL << 31) - 1.0);
  SoftmaxScaling s;
  s.diff = quantize_multiplier(real, 32);
  if (s.diff.shift < 0) unsupported(n, "QLinearSoftmax: input scale " + std::to_string(input_scale) + " is below 2^-26");
  s.diff_min = -static_cast<int32_t>(std::floor(31.0 * static_cast<double>(1LL << 26) / static_cast<double>(1LL << s.diff.shift)));
  return s;
}

// One row of `len` codes (stride `step`).
void softmax_row(const Tensor& x, Tensor& y, int64_t base, int64_t len, int64_t step, const SoftmaxScaling& s, DType out) {
  const QRange r = qrange(out);
  int32_t m = std::numeric_limits<int32_t>::min();
  for (int64_t j = 0; j < len; ++j) m = std::max(m, qload(x, base + j * step));
  auto exp_of = [&](int64_t j, int32_t* e) {
    const int32_t diff = qload(x, base + j * step) - m;
    if (diff < s.diff_min) return false;
    *e = exp_negative(fx_mul(diff * (1 << s.diff.shift), s.diff.multiplier));
    return true;
  };
  int32_t sum = 0, e = 0;  // Q12: at most len * 2^19 (qsoftmax checks len)
  for (int64_t j = 0; j < len; ++j)
    if (exp_of(j, &e)) sum += fx_div_pot(e, 12);
  int bits_over_unit = 0;
  const int32_t recip = reciprocal(sum, &bits_over_unit);
  const int exponent = bits_over_unit + 31 - 8;
  for (int64_t j = 0; j < len; ++j) {
    const int32_t v = exp_of(j, &e) ? fx_div_pot(fx_mul(recip, e), exponent) + r.lo : r.lo;
    store_code(out, y.raw(), base + j * step, std::clamp(v, r.lo, r.hi));
  }
}

Kernel qsoftmax(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) {
  check_8bit(n, in[0]);
  if (n.out_q.scale[0] != 1.0f / 256 || n.out_q.zero_point[0] != qrange(n.out_q.dtype).lo)
    unsupported(n, "QLinearSoftmax writes codes in steps of 1/256 from the lowest code (output scale 1/256, zero point " +
                       std::to_string(qrange(n.out_q.dtype).lo) + ")");
  const Shape& sh = in[0].shape;
  const int64_t axis = norm_axis(n, n.attr_i("axis", -1), sh.size());
  const AxisSplit sp = split_at(sh, axis);
  const int64_t outer = sp.outer, len = sp.dim, inner = sp.inner;
  if (len > 4095) unsupported(n, "QLinearSoftmax over " + std::to_string(len) + " elements: TFLite's Q12 sum of exps holds rows of up to 4095");
  const SoftmaxScaling s = softmax_scaling(n, n.in_q[0].scale[0]);
  const DType out = n.out_q.dtype;
  Kernel k;
  k.outputs = {{sh, out}};
  k.run = [=](const In& i, const Out& o) {
    if (len == 0) return;
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t b = 0; b < inner; ++b) softmax_row(*i[0], *o[0], a * len * inner + b, len, inner, s, out);
  };
  return k;
}

}  // namespace
}  // namespace ref

void register_reference_qsoftmax() { ref::add_reference({"QLinearSoftmax"}, ref::qsoftmax); }

}  // namespace qfx::runtime
