// A target's integer arithmetic as data: how int32 accumulators become int8 codes
// (float multiply as ONNX, gemmlowp/TFLite fixed point, or a plain shift), how
// wide the accumulator is, how elementwise ops rescale, and which nonlinear ops run
// as lookup tables. The runtime simulates it bit for bit on every backend; an
// exported model carries it in its ONNX metadata (key kArithmeticMetadataKey).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qfx::runtime {

/// How a right shift rounds (the last step of fixed-point and shift requantization).
enum class Rounding {
  kHalfEven,          ///< ties to even (IEEE 754 default, ONNX QuantizeLinear)
  kHalfAwayFromZero,  ///< ties away from zero (gemmlowp RoundingDivideByPOT, TFLite)
  kHalfUp,            ///< ties toward +infinity: (x + 2^(e-1)) >> e, the cheapest in hardware
};

/// How an integer result is brought to the output's scale.
enum class RequantMode {
  kFloat,       ///< float(acc) * m, rounded half to even (ONNX QuantizeLinear; qfx's default)
  kFixedPoint,  ///< integer multiplier M and shift: RoundingShift(HighMul(acc, M), s) (gemmlowp / TFLite)
  kShift,       ///< m must be a power of two 2^-k: a rounding right shift by k only
};

/// What an accumulator narrower than 32 bits does when a sum leaves its range.
enum class Overflow {
  kSaturate,  ///< clamps to [-2^(b-1), 2^(b-1)-1] (applied to the final sum, bias included)
  kWrap,      ///< keeps the low b bits, two's complement (exact for any summation order)
};

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
  /// ONNX op types ("Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "Exp", "Erf")
  /// that run as 256-entry int8 -> int8 tables between a DequantizeLinear and a
  /// QuantizeLinear: table[q] = Q(f(DQ(q))) computed once at load with the float
  /// kernel of the op.
  std::vector<std::string> lut;

  /// True for ONNX's arithmetic (nothing to simulate).
  bool is_float() const;
  /// One line: "requantize fixed_point (32-bit multiplier, half_away_from_zero), accumulator 32 bits, ...".
  std::string describe() const;
  /// The JSON object stored in ONNX metadata and encodings.json:
  /// {"requantize", "multiplier_bits", "rounding", "accumulator_bits", "overflow",
  ///  "elementwise", "elementwise_multiplier_bits", "elementwise_left_shift", "lut"}.
  std::string to_json() const;
  /// Parses to_json's format (absent keys keep defaults). Throws DataError naming
  /// `what` and the key for malformed JSON, an unknown key or an out-of-range value.
  static Arithmetic from_json(const std::string& json, const std::string& what);
  /// Checks ranges and combinations; throws DataError naming `what`.
  void validate(const std::string& what) const;
};

/// The ONNX `metadata_props` key an exported model stores Arithmetic::to_json() under.
inline constexpr const char* kArithmeticMetadataKey = "qfx.arithmetic";

/// The ONNX ops Arithmetic::lut may name.
const std::vector<std::string>& lut_op_types();

// --- fixed-point primitives (gemmlowp fixedpoint.h, TFLite kernels/internal/common.h) ---

/// gemmlowp's SaturatingRoundingDoublingHighMul generalised to a `bits`-bit
/// multiplier: a * b / 2^(bits-1) rounded to nearest with gemmlowp's nudge (ties
/// toward +infinity: 1.5 -> 2, -1.5 -> -1), saturated to int32. bits = 32 is
/// gemmlowp's exactly (INT32_MIN * INT32_MIN saturates to INT32_MAX).
int32_t rounding_high_mul(int32_t a, int32_t b, int bits = 32);

/// x / 2^e rounded as `r` (e in 0..63; e >= 63 gives the sign's rounding of a
/// tiny value). kHalfAwayFromZero is gemmlowp's RoundingDivideByPOT.
int64_t rounding_shift_right(int64_t x, int e, Rounding r);

/// A real multiplier m > 0 as an integer multiplier and an exponent, as TFLite's
/// QuantizeMultiplier: m ≈ multiplier · 2^(shift - (bits-1)), multiplier in
/// [2^(bits-2), 2^(bits-1)) (rounded half away from zero from frexp's mantissa).
/// `shift` > 0 is a left shift. m = 0 gives {0, 0}, and so does m < 2^-32 (shift
/// below -31, as TFLite: every int32 product rounds to 0).
struct QuantizedMultiplier {
  int32_t multiplier = 0;
  int shift = 0;
};
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
  Requantizer(RequantMode mode, int bits, Rounding rounding, int acc_bits, Overflow overflow, std::vector<float> mult,
              const std::string& where);
  /// Conv / gemm requantization of `a` for target `ar`.
  static Requantizer accumulator(const Arithmetic& ar, std::vector<float> mult, const std::string& where);
  /// Average pooling's sum -> mean rescale: `ar`'s elementwise mode, its accumulator limit.
  static Requantizer pooling(const Arithmetic& ar, std::vector<float> mult, const std::string& where);
  /// Elementwise rescale of `ar` (no accumulator limit).
  static Requantizer rescale(const Arithmetic& ar, std::vector<float> mult, const std::string& where);

  /// The rounded result before the zero point (saturated to int32).
  int32_t scaled(int64_t acc, size_t channel) const;
  /// The output code: scaled(acc) + zp, saturated to [lo, hi]. In kFloat mode
  /// exactly runtime::requantize (kernel.h).
  int32_t code(int64_t acc, size_t channel, int32_t zp, int32_t lo, int32_t hi) const;

  RequantMode mode() const { return mode_; }
  /// Per channel: the float multipliers, and for kFixedPoint / kShift the integer
  /// multiplier and shift (kShift: multiplier 1, shift = -k).
  const std::vector<float>& multipliers() const { return mult_; }
  const std::vector<QuantizedMultiplier>& quantized() const { return q_; }
  int bits() const { return bits_; }
  Rounding rounding() const { return rounding_; }
  int accumulator_bits() const { return acc_bits_; }
  Overflow overflow() const { return overflow_; }

 private:
  RequantMode mode_ = RequantMode::kFloat;
  int bits_ = 32;
  Rounding rounding_ = Rounding::kHalfEven;
  int acc_bits_ = 32;
  Overflow overflow_ = Overflow::kSaturate;
  std::vector<float> mult_;
  std::vector<QuantizedMultiplier> q_;
};

}  // namespace qfx::runtime
