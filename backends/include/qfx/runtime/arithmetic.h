// A target's integer arithmetic as data: how int32 accumulators become int8 codes
// (float multiply as ONNX, gemmlowp/TFLite fixed point, or a plain shift), how
// wide the accumulator is, how elementwise ops rescale, and which nonlinear ops run
// as lookup tables. The runtime simulates it bit for bit on every backend; an
// exported model carries it in its ONNX metadata (key kArithmeticMetadataKey).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>
#include <string>
#include <vector>

#include "qfx/runtime/arith_hd.h"

namespace qfx::runtime {

/// "half_even", "half_away_from_zero", "half_up"; "float", "fixed_point", "shift";
/// "saturate", "wrap".
const char* rounding_name(Rounding r);
const char* requant_mode_name(RequantMode m);
const char* overflow_name(Overflow o);

/// A target's integer arithmetic (the `arithmetic` section of a backend YAML).
/// Default-constructed: ONNX's arithmetic, what every QDQ consumer computes.
struct Arithmetic {
  /// Requantization of conv / gemm / matmul accumulators.
  RequantMode requantize = RequantMode::kFloat;
  /// kFixedPoint: width of the multiplier M in bits (2..32; M in [2^(b-2), 2^(b-1)),
  /// a Q(b-1) number in [0.5, 1)).
  int multiplier_bits = 32;
  /// Rounding of the final right shift (kFixedPoint, kShift). kFloat rounds half to even.
  Rounding rounding = Rounding::kHalfEven;
  /// Accumulator width in bits (8..32) and its overflow behaviour: applied to the
  /// int32 sum (bias included) of conv / gemm / matmul and to pooling sums.
  int accumulator_bits = 32;
  Overflow overflow = Overflow::kSaturate;
  /// Rescaling in QLinearAdd / QLinearMul / average pooling / QLinearConcat / QRelu /
  /// QClip: kFloat (ONNX), or kFixedPoint / kShift as TFLite's int8 add does: each
  /// input's (q - zero_point) shifted left by `elementwise_left_shift` bits,
  /// rescaled to a common scale 2·max(input scales), summed, then rescaled to the
  /// output; mul multiplies the integer differences, then rescales once.
  RequantMode elementwise = RequantMode::kFloat;
  /// Multiplier width of the elementwise rescales (kFixedPoint).
  int elementwise_multiplier_bits = 32;
  /// Left shift of add's inputs before rescaling (0..22; TFLite uses 20 for int8).
  int elementwise_left_shift = 20;
  /// Average pooling whose input and output share scale and zero point (int8
  /// AveragePool / GlobalAveragePool): false rescales the sum by 1/count with the
  /// elementwise mode; true divides the sum of codes by the count, rounding half away
  /// from zero, as TFLite's int8 AVERAGE_POOL_2D does ((sum ± count/2) / count).
  /// Pools that change qparams rescale either way.
  bool average_pool_divide = false;
  /// Fully connected layers (QGemm, QLinearMatMul with constant weights) under
  /// kFixedPoint: false requantizes as conv does (high multiply, then the final
  /// shift: two roundings); true rounds once, (acc · M + 2^(n-1)) >> n with
  /// n = bits - 1 - shift (ties toward +infinity), as LiteRT's reference int8
  /// FULLY_CONNECTED with per-channel weights computes.
  bool fully_connected_single_rounding = false;
  /// ONNX op types of lut_op_types() ("Sigmoid", "Tanh", "Elu", ...)
  /// that run as 256-entry int8 -> int8 tables between a DequantizeLinear and a
  /// QuantizeLinear: table[q] = Q(f(DQ(q))) computed once at load with the float
  /// kernel of the op. Under ONNX's arithmetic (is_float()) every op of
  /// lut_op_types() runs so: the table equals the float group it replaces.
  std::vector<std::string> lut;
  /// Softmax between a DequantizeLinear and a QuantizeLinear (8-bit per-tensor codes,
  /// output scale 1/256, output zero point the code type's lowest): false runs it in
  /// float (the QDQ group as written); true runs TFLite's reference int8 SOFTMAX
  /// (LiteRT's reference_ops::Softmax, TFLite Micro's, CMSIS-NN's, Arm Ethos-U's):
  /// code differences below the row's largest code scaled to Q5.26 by a 32-bit
  /// multiplier, gemmlowp's fixed-point exp and reciprocal, each output rounded by
  /// RoundingDivideByPOT (QLinearSoftmax).
  bool softmax_fixed_point = false;
  /// ONNX op types ("Gelu", "Softmax", "LayerNormalization") that run integer-only
  /// between a DequantizeLinear and a QuantizeLinear, as I-BERT computes them
  /// (qfx/runtime/integer_only.h). "Gelu" also matches GELU written out with Erf,
  /// "LayerNormalization" the opset-14 ReduceMean / Sqrt / Div form.
  std::vector<std::string> integer_only;

  /// True for ONNX's arithmetic (nothing to simulate).
  bool is_float() const;
  /// One line: "requantize fixed_point (32-bit multiplier, half_away_from_zero), accumulator 32 bits, ...".
  std::string describe() const;
  /// The JSON object stored in ONNX metadata and encodings.json:
  /// {"requantize", "multiplier_bits", "rounding", "accumulator_bits", "overflow",
  ///  "elementwise", "elementwise_multiplier_bits", "elementwise_left_shift", "lut",
  ///  "integer_only", "average_pool": "divide", "fully_connected_rounding": "single",
  ///  "softmax": "fixed_point" (the last three written only when set)}.
  std::string to_json() const;
  /// Parses to_json's format (absent keys keep defaults). Throws DataError naming
  /// `what` and the key for malformed JSON, an unknown key or an out-of-range value.
  static Arithmetic from_json(const std::string& json, const std::string& what);
  /// Checks ranges and combinations; throws DataError naming `what`.
  void validate(const std::string& what) const;
};

/// The ONNX `metadata_props` key an exported model stores Arithmetic::to_json() under.
inline constexpr const char* kArithmeticMetadataKey = "qfx.arithmetic";

// --- fixed-point primitives (gemmlowp fixedpoint.h, TFLite kernels/internal/common.h) ---

/// gemmlowp's SaturatingRoundingDoublingHighMul generalised to a `bits`-bit
/// multiplier: a * b / 2^(bits-1) rounded to nearest with gemmlowp's nudge (ties
/// toward +infinity: 1.5 -> 2, -1.5 -> -1), saturated to int32. bits = 32 is
/// gemmlowp's exactly (INT32_MIN * INT32_MIN saturates to INT32_MAX).
int32_t rounding_high_mul(int32_t a, int32_t b, int bits = 32);

/// x / 2^e rounded as `r` (e in 0..63; e >= 63 gives the sign's rounding of a
/// tiny value). kHalfAwayFromZero is gemmlowp's RoundingDivideByPOT.
int64_t rounding_shift_right(int64_t x, int e, Rounding r);

/// `m` as TFLite's QuantizeMultiplier makes it (QuantizedMultiplier, arith_hd.h).
/// Throws DataError for bits outside 2..32 or a negative / non-finite m.
QuantizedMultiplier quantize_multiplier(double m, int bits = 32);

/// TFLite's MultiplyByQuantizedMultiplier: RoundingShift(rounding_high_mul(x · 2^left,
/// M), right) with left = max(shift, 0), right = max(-shift, 0); x · 2^left
/// saturates to int32 (TFLite leaves it undefined).
int32_t multiply_by_quantized_multiplier(int32_t x, QuantizedMultiplier q, int bits, Rounding r);

/// `acc` reduced to a `bits`-bit accumulator (bits 32: unchanged).
int32_t limit_accumulator(int64_t acc, int bits, Overflow o);

/// One op's requantization, per output channel: from an integer accumulator to the
/// output code. Built from the float32 multipliers m_c the ONNX arithmetic uses
/// (in_scale · w_scale_c / out_scale, computed in float32 as the kernels do).
class Requantizer {
 public:
  Requantizer() = default;
  /// `mode`, multiplier `bits`, `rounding`, accumulator `acc_bits` / `overflow`
  /// as in Arithmetic. Throws DataError naming `where` for kShift with a
  /// multiplier that is not a power of two, or a non-positive multiplier.
  /// `exact`, when given (one per multiplier), are the same multipliers computed in
  /// double from the float32 scales, as TFLite's kernels compute them before
  /// QuantizeMultiplier: kFixedPoint builds its integer multipliers from them (kFloat
  /// and kShift use `mult`).
  Requantizer(RequantMode mode, int bits, Rounding rounding, int acc_bits, Overflow overflow, std::vector<float> mult,
              const std::string& where, const std::vector<double>& exact = {});
  /// Conv / gemm requantization of `a` for target `ar`.
  static Requantizer accumulator(const Arithmetic& ar, std::vector<float> mult, const std::string& where,
                                 const std::vector<double>& exact = {});
  /// Average pooling's sum -> mean rescale: `ar`'s elementwise mode, its accumulator limit.
  static Requantizer pooling(const Arithmetic& ar, std::vector<float> mult, const std::string& where);
  /// Elementwise rescale of `ar` (no accumulator limit).
  static Requantizer rescale(const Arithmetic& ar, std::vector<float> mult, const std::string& where,
                             const std::vector<double>& exact = {});

  /// The rounded result before the zero point (saturated to int32).
  int32_t scaled(int64_t acc, size_t channel) const;
  /// The output code: scaled(acc) + zp, saturated to [lo, hi]. In kFloat mode
  /// exactly runtime::requantize (kernel.h).
  int32_t code(int64_t acc, size_t channel, int32_t zp, int32_t lo, int32_t hi) const;

  /// out[k] = code(acc[k] + bias, channel, zp, lo, hi) for k < n: one channel's
  /// run of accumulators (a plane of NCHW output), the mode chosen once.
  template <typename T>
  void codes(const int32_t* acc, int64_t n, int32_t bias, size_t channel, int32_t zp, int32_t lo, int32_t hi, T* out) const;
  /// out[c] = code(acc[c] + bias[c], c, zp, lo, hi) for c < n: one row of
  /// channels-last output (channel c at position c).
  template <typename T>
  void codes_per_channel(const int32_t* acc, int64_t n, const int32_t* bias, int32_t zp, int32_t lo, int32_t hi, T* out) const;

  /// 16x8 layers (int16 activations, int8 weights) accumulate in 64 bits, as
  /// TFLite's 16x8 kernels do: no accumulator limit, and one rounding of the
  /// exact product. kFloat: round_half_even(double(acc) · m_c) (the ONNX arithmetic
  /// without float32's 24-bit mantissa); kFixedPoint: acc · M_c / 2^(bits-1-shift_c)
  /// rounded as rounding() in 128-bit arithmetic (TFLite's int64
  /// MultiplyByQuantizedMultiplier with a `bits`-bit multiplier and the target's
  /// rounding); kShift: acc / 2^k rounded as rounding(). Result saturated to int32.
  int32_t scaled_wide(int64_t acc, size_t channel) const;
  /// scaled_wide(acc) + zp, saturated to [lo, hi] (the int16 or int8 output range).
  int32_t code_wide(int64_t acc, size_t channel, int32_t zp, int32_t lo, int32_t hi) const;
  /// out[k] = code_wide(acc[k] + bias, channel, zp, lo, hi) for k < n.
  template <typename T>
  void codes_wide(const int64_t* acc, int64_t n, int64_t bias, size_t channel, int32_t zp, int32_t lo, int32_t hi, T* out) const;

  RequantMode mode() const { return mode_; }
  /// Per channel: the float multipliers, and for kFixedPoint / kShift the integer
  /// multiplier and shift (kShift: multiplier 1, shift = -k).
  const std::vector<float>& multipliers() const { return mult_; }
  const std::vector<QuantizedMultiplier>& quantized() const { return q_; }
  /// The construction parameters: multiplier width, rounding of the final shift,
  /// accumulator width (32: none) and its overflow behaviour.
  int bits() const { return bits_; }
  Rounding rounding() const { return rounding_; }
  int accumulator_bits() const { return acc_bits_; }
  Overflow overflow() const { return overflow_; }

  /// scaled / code with the mode and rounding fixed at compile time (M must be
  /// mode(), R rounding() or kHalfEven for kFloat): for inner loops, via dispatch.
  template <RequantMode M, Rounding R>
  int32_t scaled_as(int64_t acc, size_t channel) const;
  template <RequantMode M, Rounding R>
  int32_t code_as(int64_t acc, size_t channel, int32_t zp, int32_t lo, int32_t hi) const;
  /// scaled_wide with the mode and rounding fixed at compile time.
  template <RequantMode M, Rounding R>
  int32_t scaled_wide_as(int64_t acc, size_t channel) const;
  /// Calls f(integral_constant<RequantMode>, integral_constant<Rounding>) with this
  /// requantizer's mode and rounding: `rq.dispatch([&](auto m, auto r) { loop using
  /// rq.code_as<decltype(m)::value, decltype(r)::value>(...); })`.
  template <typename F>
  decltype(auto) dispatch(F&& f) const;
  /// This requantizer as plain data over its own multipliers (valid while it lives).
  hd::RequantView view() const {
    return {mode_, rounding_, bits_, acc_bits_, overflow_, mult_.size() > 1, mult_.data(), q_.empty() ? nullptr : q_.data()};
  }

 private:
  RequantMode mode_ = RequantMode::kFloat;
  int bits_ = 32;
  Rounding rounding_ = Rounding::kHalfEven;
  int acc_bits_ = 32;
  Overflow overflow_ = Overflow::kSaturate;
  std::vector<float> mult_;
  std::vector<QuantizedMultiplier> q_;
};

// --- inline definitions (the kernels' inner loops call these per element) --------
// The formulas live in arith_hd.h, shared with the CUDA kernels.


[[gnu::always_inline]] inline int32_t rounding_high_mul(int32_t a, int32_t b, int bits) {
  return hd::rounding_high_mul(a, b, bits);
}

inline int64_t rounding_shift_right(int64_t x, int e, Rounding r) {
  switch (r) {
    case Rounding::kHalfUp: return hd::rounding_shift_right_in<Rounding::kHalfUp, int64_t>(x, e);
    case Rounding::kHalfAwayFromZero: return hd::rounding_shift_right_in<Rounding::kHalfAwayFromZero, int64_t>(x, e);
    case Rounding::kHalfEven: break;
  }
  return hd::rounding_shift_right_in<Rounding::kHalfEven, int64_t>(x, e);
}

inline int32_t multiply_by_quantized_multiplier(int32_t x, QuantizedMultiplier q, int bits, Rounding r) {
  switch (r) {
    case Rounding::kHalfUp: return hd::multiply_by_quantized_multiplier<Rounding::kHalfUp>(x, q, bits);
    case Rounding::kHalfAwayFromZero: return hd::multiply_by_quantized_multiplier<Rounding::kHalfAwayFromZero>(x, q, bits);
    case Rounding::kHalfEven: break;
  }
  return hd::multiply_by_quantized_multiplier<Rounding::kHalfEven>(x, q, bits);
}

[[gnu::always_inline]] inline int32_t limit_accumulator(int64_t acc, int bits, Overflow o) {
  return hd::limit_accumulator(acc, bits, o);
}

template <RequantMode M, Rounding R>
[[gnu::always_inline]] inline int32_t Requantizer::scaled_as(int64_t acc, size_t c) const {
  const size_t i = mult_.size() == 1 ? 0 : c;
  QuantizedMultiplier q{};
  if constexpr (M != RequantMode::kFloat) q = q_[i];  // kFloat keeps no integer multipliers
  return hd::requant_scaled<M, R>(hd::limit_accumulator(acc, acc_bits_, overflow_), mult_[i], q, bits_);
}

template <RequantMode M, Rounding R>
[[gnu::always_inline]] inline int32_t Requantizer::code_as(int64_t acc, size_t c, int32_t zp, int32_t lo, int32_t hi) const {
  // kFloat is runtime::requantize (kernel.h): saturate(round_half_even(float(acc) * m) + zp).
  return hd::clamp_code(static_cast<int64_t>(scaled_as<M, R>(acc, c)) + zp, lo, hi);
}

template <RequantMode M, Rounding R>
[[gnu::always_inline]] inline int32_t Requantizer::scaled_wide_as(int64_t acc, size_t c) const {
  const size_t i = mult_.size() == 1 ? 0 : c;
  if constexpr (M == RequantMode::kFloat) {
    double v = __builtin_nearbyint(static_cast<double>(acc) * static_cast<double>(mult_[i]));
    if (v != v) v = 0.0;
    return static_cast<int32_t>(v < -2147483648.0 ? -2147483648.0 : (v > 2147483647.0 ? 2147483647.0 : v));
  } else {
    // kShift: multiplier 1, shift -k; kFixedPoint: m = M · 2^(shift - (bits-1)).
    const int e = (M == RequantMode::kFixedPoint ? bits_ - 1 : 0) - q_[i].shift;
    const __int128 p = static_cast<__int128>(acc) * q_[i].multiplier;
    const __int128 r = e >= 0 ? hd::rounding_shift_right_in<R, __int128>(p, e) : p * (__int128{1} << (-e < 32 ? -e : 32));
    return static_cast<int32_t>(r < INT32_MIN ? INT32_MIN : (r > INT32_MAX ? INT32_MAX : r));
  }
}

template <typename F>
[[gnu::always_inline]] inline decltype(auto) Requantizer::dispatch(F&& f) const {
  return hd::requant_dispatch(mode_, rounding_, std::forward<F>(f));
}

[[gnu::always_inline]] inline int32_t Requantizer::scaled(int64_t acc, size_t c) const {
  return dispatch([&](auto m, auto r) { return scaled_as<decltype(m)::value, decltype(r)::value>(acc, c); });
}

[[gnu::always_inline]] inline int32_t Requantizer::code(int64_t acc, size_t c, int32_t zp, int32_t lo, int32_t hi) const {
  return dispatch([&](auto m, auto r) { return code_as<decltype(m)::value, decltype(r)::value>(acc, c, zp, lo, hi); });
}

template <typename T>
void Requantizer::codes(const int32_t* acc, int64_t n, int32_t bias, size_t c, int32_t zp, int32_t lo, int32_t hi, T* out) const {
  dispatch([&](auto m, auto r) {  // one loop per mode and rounding, each with its arithmetic inlined
    for (int64_t k = 0; k < n; ++k)
      out[k] = static_cast<T>(code_as<decltype(m)::value, decltype(r)::value>(int64_t{acc[k]} + bias, c, zp, lo, hi));
  });
}

[[gnu::always_inline]] inline int32_t Requantizer::scaled_wide(int64_t acc, size_t c) const {
  return dispatch([&](auto m, auto r) { return scaled_wide_as<decltype(m)::value, decltype(r)::value>(acc, c); });
}

[[gnu::always_inline]] inline int32_t Requantizer::code_wide(int64_t acc, size_t c, int32_t zp, int32_t lo, int32_t hi) const {
  const int64_t v = static_cast<int64_t>(scaled_wide(acc, c)) + zp;
  return static_cast<int32_t>(v < lo ? lo : (v > hi ? hi : v));
}

template <typename T>
void Requantizer::codes_wide(const int64_t* acc, int64_t n, int64_t bias, size_t c, int32_t zp, int32_t lo, int32_t hi,
                             T* out) const {
  dispatch([&](auto m, auto r) {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t v = static_cast<int64_t>(scaled_wide_as<decltype(m)::value, decltype(r)::value>(acc[k] + bias, c)) + zp;
      out[k] = static_cast<T>(v < lo ? lo : (v > hi ? hi : v));
    }
  });
}

template <typename T>
void Requantizer::codes_per_channel(const int32_t* acc, int64_t n, const int32_t* bias, int32_t zp, int32_t lo, int32_t hi,
                                    T* out) const {
  dispatch([&](auto m, auto r) {
    for (int64_t c = 0; c < n; ++c)
      out[c] = static_cast<T>(code_as<decltype(m)::value, decltype(r)::value>(int64_t{acc[c]} + bias[c], static_cast<size_t>(c), zp, lo, hi));
  });
}

}  // namespace qfx::runtime
