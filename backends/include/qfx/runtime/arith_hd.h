// The integer arithmetic of qfx's int8 kernels, written once for the CPU and the GPU:
// quantization, the saturating conversions, gemmlowp / TFLite fixed-point
// requantization, accumulator limits and histogram bin indices. Every function here
// is `__host__ __device__` under nvcc and a plain always-inline function otherwise,
// so the reference kernels (and their tests) run the very code the CUDA kernels run.
// No standard-library call and no exception may appear here.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define QFX_HD __host__ __device__ __forceinline__
#else
#define QFX_HD [[gnu::always_inline]] inline
#endif

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

/// A real multiplier m > 0 as an integer multiplier and an exponent, as TFLite's
/// QuantizeMultiplier: m ≈ multiplier · 2^(shift - (bits-1)), multiplier in
/// [2^(bits-2), 2^(bits-1)) (rounded half away from zero from frexp's mantissa).
/// `shift` > 0 is a left shift. m = 0 gives {0, 0}, and so does m < 2^-32 (shift
/// below -31, as TFLite: every int32 product rounds to 0). Built by quantize_multiplier
/// (arithmetic.h).
struct QuantizedMultiplier {
  int32_t multiplier = 0;
  int shift = 0;
};

namespace hd {

/// `v` saturated to the int32 range.
QFX_HD int32_t sat32(int64_t v) {
  return static_cast<int32_t>(v < INT32_MIN ? INT32_MIN : (v > INT32_MAX ? INT32_MAX : v));
}

/// `v` clamped to [lo, hi].
QFX_HD int32_t clamp_code(int64_t v, int32_t lo, int32_t hi) {
  return static_cast<int32_t>(v < lo ? lo : (v > hi ? hi : v));
}

/// x rounded to the nearest integer, ties to even (IEEE 754 roundTiesToEven, the
/// default rounding mode): nearbyintf on the host, rintf on the device.
QFX_HD float round_half_even(float x) {
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return __builtin_nearbyintf(x);
#endif
}

/// The last step of QuantizeLinear and of requantization: an already rounded float
/// `q` (NaN counts as 0) plus `zp`, saturated to [qmin, qmax]. `q` is clamped in
/// float first: converting a float beyond the integer range (an infinite Clip
/// bound, a huge value) to an integer is undefined behaviour.
QFX_HD int32_t saturate_code(float q, int32_t zp, int32_t qmin, int32_t qmax) {
  if (q != q) q = 0.0f;
  q = q < -2147483520.0f ? -2147483520.0f : (q > 2147483520.0f ? 2147483520.0f : q);
  return clamp_code(static_cast<int64_t>(q) + zp, qmin, qmax);
}

/// ONNX QuantizeLinear (opset 13): saturate(round_half_even(x / scale) + zp); NaN
/// quantizes to the zero point. x / scale is an IEEE division (nvcc's default
/// -prec-div=true), so host and device agree bit for bit.
QFX_HD int32_t quantize_value(float x, float scale, int32_t zp, int32_t qmin, int32_t qmax) {
  return saturate_code(round_half_even(x / scale), zp, qmin, qmax);
}

/// gemmlowp's SaturatingRoundingDoublingHighMul generalised to a `bits`-bit
/// multiplier (2..32): a * b / 2^(bits-1) rounded to nearest with gemmlowp's nudge,
/// saturated to int32. bits = 32 is gemmlowp's exactly.
QFX_HD int32_t rounding_high_mul(int32_t a, int32_t b, int bits) {
  const int64_t ab = static_cast<int64_t>(a) * static_cast<int64_t>(b);
  const int64_t half = int64_t{1} << (bits - 2);
  const int64_t nudge = ab >= 0 ? half : 1 - half;
  // Division truncating toward zero, as gemmlowp's `/ (1ll << 31)`, without a divide.
  const int64_t x = ab + nudge;
  const int e = bits - 1;
  return sat32((x + (x < 0 ? (int64_t{1} << e) - 1 : 0)) >> e);
}

/// x / 2^e rounded as R, in the signed integer type I (int64_t; __int128 on the host).
/// e <= 0 returns x; e beyond the type's width rounds a tiny value.
template <Rounding R, typename I>
QFX_HD I rounding_shift_right_in(I x, int e) {
  constexpr int kMaxShift = static_cast<int>(sizeof(I)) * 8 - 2;
  if (e <= 0) return x;
  if (e > kMaxShift) e = kMaxShift;  // |x| < 2^(width-1): the result rounds to 0 (or -1 / 0) either way
  const I floor = x >> e;  // arithmetic shift: floor division
  const I rem = x - floor * (I{1} << e);
  const I half = I{1} << (e - 1);
  if constexpr (R == Rounding::kHalfUp) return floor + (rem >= half ? 1 : 0);
  else if constexpr (R == Rounding::kHalfAwayFromZero) return floor + ((x >= 0 ? rem >= half : rem > half) ? 1 : 0);
  else return floor + ((rem > half || (rem == half && (floor & 1))) ? 1 : 0);
}

/// TFLite's MultiplyByQuantizedMultiplier with a `bits`-bit multiplier and rounding R:
/// RoundingShift(rounding_high_mul(x · 2^left, M), right); x · 2^left saturates.
template <Rounding R>
QFX_HD int32_t multiply_by_quantized_multiplier(int32_t x, QuantizedMultiplier q, int bits) {
  const int left = q.shift > 0 ? q.shift : 0, right = q.shift > 0 ? 0 : -q.shift;
  const int32_t shifted = left > 0 ? sat32(static_cast<int64_t>(x) * (int64_t{1} << (left < 32 ? left : 32))) : x;
  return sat32(rounding_shift_right_in<R, int64_t>(rounding_high_mul(shifted, q.multiplier, bits), right));
}

/// `acc` reduced to a `bits`-bit accumulator. 32 bits: the int32 accumulator of ONNX's
/// integer ops, two's complement whatever `o` (its low 32 bits: ONNX Runtime's
/// QLinearConv / QGemm add the int32 bias so, and an int32 MAC unit accumulates so in
/// any order). Narrower: saturated to [-2^(bits-1), 2^(bits-1)-1], or its low `bits`
/// bits (kWrap).
QFX_HD int32_t limit_accumulator(int64_t acc, int bits, Overflow o) {
  if (bits >= 32) return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(acc)));
  if (o == Overflow::kWrap) {
    const uint32_t low = static_cast<uint32_t>(static_cast<uint64_t>(acc)) << (32 - bits);
    return static_cast<int32_t>(low) >> (32 - bits);  // arithmetic shift sign-extends
  }
  const int64_t hi = (int64_t{1} << (bits - 1)) - 1;
  return static_cast<int32_t>(acc < -hi - 1 ? -hi - 1 : (acc > hi ? hi : acc));
}

/// One requantization of an already limited accumulator `a` to the output scale,
/// before the zero point: kFloat round_half_even(float(a) · m) (clamped to int32);
/// kFixedPoint multiply_by_quantized_multiplier(a, q, bits); kShift a · 2^shift
/// (shift >= 0) or a rounding right shift by -shift. R must be kHalfEven for kFloat.
template <RequantMode M, Rounding R>
QFX_HD int32_t requant_scaled(int32_t a, float m, QuantizedMultiplier q, int bits) {
  if constexpr (M == RequantMode::kFloat) {
    float v = round_half_even(static_cast<float>(a) * m);
    if (v != v) v = 0.0f;
    return static_cast<int32_t>(v < -2147483520.0f ? -2147483520.0f : (v > 2147483520.0f ? 2147483520.0f : v));
  } else if constexpr (M == RequantMode::kFixedPoint) {
    return multiply_by_quantized_multiplier<R>(a, q, bits);
  } else {
    const int s = q.shift;
    return s >= 0 ? sat32(static_cast<int64_t>(a) * (int64_t{1} << (s < 32 ? s : 32)))
                  : sat32(rounding_shift_right_in<R, int64_t>(a, -s));
  }
}

/// A compile-time requantization mode or rounding, as requant_dispatch hands them
/// to its callable (`decltype(m)::value`).
template <RequantMode M>
struct ModeTag {
  static constexpr RequantMode value = M;
};
template <Rounding R>
struct RoundingTag {
  static constexpr Rounding value = R;
};

/// Calls f(ModeTag<mode>{}, RoundingTag<rounding>{}) with the run-time `mode` and
/// `rounding` made compile-time constants (kFloat always with kHalfEven), so inner
/// loops inline one arithmetic: the one dispatch of the host's Requantizer and the
/// CUDA kernels.
template <typename F>
QFX_HD decltype(auto) requant_dispatch(RequantMode mode, Rounding rounding, F&& f) {
  using M = RequantMode;
  using R = Rounding;
  if (mode == M::kFloat) return f(ModeTag<M::kFloat>{}, RoundingTag<R::kHalfEven>{});
  if (mode == M::kFixedPoint) {
    if (rounding == R::kHalfUp) return f(ModeTag<M::kFixedPoint>{}, RoundingTag<R::kHalfUp>{});
    if (rounding == R::kHalfAwayFromZero) return f(ModeTag<M::kFixedPoint>{}, RoundingTag<R::kHalfAwayFromZero>{});
    return f(ModeTag<M::kFixedPoint>{}, RoundingTag<R::kHalfEven>{});
  }
  if (rounding == R::kHalfUp) return f(ModeTag<M::kShift>{}, RoundingTag<R::kHalfUp>{});
  if (rounding == R::kHalfAwayFromZero) return f(ModeTag<M::kShift>{}, RoundingTag<R::kHalfAwayFromZero>{});
  return f(ModeTag<M::kShift>{}, RoundingTag<R::kHalfEven>{});
}

/// One op's requantization as plain data over borrowed multipliers: what a
/// Requantizer (arithmetic.h) is to a kernel that cannot hold it (Requantizer::view;
/// the CUDA kernels' argument, with device pointers). `mult` (and, unless kFloat,
/// `q`): one entry, or one per output channel when `per_channel`.
struct RequantView {
  RequantMode mode = RequantMode::kFloat;
  Rounding rounding = Rounding::kHalfEven;
  int bits = 32;                          ///< fixed-point multiplier width
  int acc_bits = 32;                      ///< accumulator width (limit_accumulator)
  Overflow overflow = Overflow::kSaturate;
  int per_channel = 0;                    ///< nonzero: one multiplier per channel
  const float* mult = nullptr;
  const QuantizedMultiplier* q = nullptr;

  /// The rounded result of accumulator `acc` of channel `c` before the zero point,
  /// with the mode and rounding fixed at compile time.
  template <RequantMode M, Rounding R>
  QFX_HD int32_t scaled_as(int64_t acc, int64_t c) const {
    const int64_t i = per_channel ? c : 0;
    QuantizedMultiplier qm{};
    if constexpr (M != RequantMode::kFloat) qm = q[i];  // kFloat keeps no integer multipliers
    return requant_scaled<M, R>(limit_accumulator(acc, acc_bits, overflow), mult[i], qm, bits);
  }
  /// scaled_as with the view's own mode and rounding.
  QFX_HD int32_t scaled(int64_t acc, int64_t c) const {
    return requant_dispatch(mode, rounding, [&](auto m, auto r) { return scaled_as<decltype(m)::value, decltype(r)::value>(acc, c); });
  }
  /// The output code: scaled(acc, c) + zp, clamped to [lo, hi].
  QFX_HD int32_t code(int64_t acc, int64_t c, int32_t zp, int32_t lo, int32_t hi) const {
    return clamp_code(static_cast<int64_t>(scaled(acc, c)) + zp, lo, hi);
  }
};

/// The calibration histogram's bin lattice (quant's HistogramObserver): value x lies in
/// lattice cell c = floor((x - lo) · inv) and in bin floor((c - off) / k). `bin`
/// computes that bin without forming c: the estimate from doubles is within one of it,
/// and exact comparisons with the bin's edge cells (integers, exact in doubles) correct
/// it. Bins beyond ±lim come out beyond it too, not exactly.
struct HistogramLattice {
  double lo, inv;  ///< lattice start and 1 / cell width
  int64_t off, k;  ///< bin 0's first cell, cells per bin
  QFX_HD double bin(float x, double lim) const {
    const double t = (static_cast<double>(x) - lo) * inv;
    const double offd = static_cast<double>(off), kd = static_cast<double>(k);
    double b = floor((t - offd) / kd);
    b = b < -lim ? -lim : (b > lim ? lim : b);
    const double edge = offd + b * kd;
    return t < edge ? b - 1.0 : (t >= edge + kd ? b + 1.0 : b);
  }
  /// bin(x) clamped to [0, bins - 1]: the bin the observer counts x in (NaN: bin 0;
  /// the observer refuses NaN, but no index may go astray first).
  QFX_HD int32_t counted_bin(float x, int64_t bins) const {
    double b = bin(x, static_cast<double>(bins + 1));
    const double last = static_cast<double>(bins - 1);
    b = b >= 0.0 ? b : 0.0;  // NaN too
    b = b < last ? b : last;
    return static_cast<int32_t>(b);
  }
};

}  // namespace hd
}  // namespace qfx::runtime
