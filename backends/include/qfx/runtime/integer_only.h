// Integer-only GELU, softmax and layer normalisation for 8-bit transformer blocks,
// as I-BERT computes them (Kim, Gholami, Yao, Mahoney, Keutzer: "I-BERT: Integer-only
// BERT Quantization", ICML 2021): a second-order polynomial for erf and exp
// (Algorithms 1-3) and Newton's integer square root (Algorithm 4). A target selects
// them with `arithmetic.integer_only` (docs/targets.md); the runtime then replaces a
// DequantizeLinear -> op -> QuantizeLinear group by one of these.
//
// Every step below is an integer operation on int64 values except the constants,
// which are computed once per op from its scales in IEEE double (floor of a
// quotient, as the paper writes them); the per-element functions are header-only so
// that every backend computes the same codes.
//
// Two choices the paper leaves to the implementation, fixed here:
// - Working grid. I-BERT's inputs are 32-bit accumulators on a fine grid; an 8-bit
//   code's grid is so coarse that floor(ln2 / S) alone would err by up to 15 %.
//   GELU and softmax therefore first shift the centred code left by k bits,
//   k >= 0 the smallest with S / 2^k <= 2^-10 (working_shift): exact, and it
//   makes every floor() in the algorithms at least 2^10 steps fine.
// - Output. The result is brought to the output QuantizeLinear's scale by one
//   integer multiply and rounding shift: m = M · 2^-e with a 31-bit M (Rescale),
//   the product in 128 bits, the shift rounding as the target's `rounding`.
#pragma once

#include <cstdint>
#include <vector>

#include "qfx/runtime/arithmetic.h"

namespace qfx::runtime::integer_only {

/// A real multiplier m > 0 as M · 2^-shift, M in [2^30, 2^31) (31 bits) rounded
/// half away from zero from frexp's mantissa; shift may exceed 63.
struct Rescale {
  int64_t multiplier = 0;
  int shift = 0;
};
/// Throws DataError naming `what` for m <= 0, m >= 2^31 or a non-finite m.
Rescale make_rescale(double m, const char* what);

/// acc · M / 2^shift rounded as `r` (exact: 128-bit product), saturated to int32.
inline int32_t rescale(int64_t acc, Rescale s, Rounding r);

/// The output code of `acc`: rescale(acc, s, r) + zp, clamped to [lo, hi].
inline int32_t output_code(int64_t acc, Rescale s, Rounding r, int32_t zp, int32_t lo, int32_t hi) {
  const int64_t c = static_cast<int64_t>(rescale(acc, s, r)) + zp;
  return static_cast<int32_t>(c < lo ? lo : (c > hi ? hi : c));
}

/// The smallest k >= 0 with scale / 2^k <= 2^-10 (the working grid above).
int working_shift(double scale);

/// Algorithm 4 (I-SQRT): floor(sqrt(n)) by Newton's iteration from
/// 2^ceil(bits(n) / 2), stopping when the iterate stops decreasing. n >= 0.
int64_t isqrt(int64_t n);

/// Algorithm 1 (I-POLY): the constants of a(x + b)^2 + c on input scale S:
/// q_b = floor(b / S), q_c = floor(c / (a S^2)), output scale a S^2.
struct Poly {
  int64_t q_b = 0, q_c = 0;
  double scale = 0;
};
Poly make_poly(double a, double b, double c, double s);
/// (q + q_b)^2 + q_c, on the output scale Poly::scale.
inline int64_t poly(int64_t q, const Poly& p) { return (q + p.q_b) * (q + p.q_b) + p.q_c; }

/// Algorithm 2 (I-GELU) for codes with scale `in_scale`, zero point `in_zp`, into
/// codes with `out_scale`, `out_zp` in [lo, hi]. On the working grid (q << k,
/// S = in_scale / 2^k): erf(x / sqrt2) ~ sgn(q) [a (min(|q|, -q_b) + q_b)^2 + c]
/// with a = -0.2888, b = -1.769, c = 1 on scale S / sqrt2; GELU ~ q (q_erf + q_1)
/// with q_1 = floor(1 / S_erf), on scale S · S_erf / 2.
struct Gelu {
  int shift = 0;       ///< k
  int32_t in_zp = 0;
  Poly erf;            ///< I-POLY for erf on scale S / sqrt(2); erf.scale = S_erf (negative: a < 0)
  int64_t q_1 = 0;     ///< floor(1 / S_erf)
  Rescale out;         ///< |S · S_erf / 2| / out_scale
  int32_t out_zp = 0, lo = 0, hi = 0;
  Rounding rounding = Rounding::kHalfEven;
};
/// Throws DataError naming `what` for an input scale below 1e-6 (int64 would overflow).
Gelu make_gelu(double in_scale, int32_t in_zp, double out_scale, int32_t out_zp, int32_t lo, int32_t hi, Rounding r,
               const char* what);
/// The output code of input code `q`.
inline int32_t gelu(int32_t q, const Gelu& g) {
  const int64_t x = static_cast<int64_t>(q - g.in_zp) * (int64_t{1} << g.shift);
  const int64_t ax = x < 0 ? -x : x;
  const int64_t clipped = ax < -g.erf.q_b ? ax : -g.erf.q_b;
  const int64_t l = poly(clipped, g.erf);
  const int64_t q_erf = x > 0 ? l : (x < 0 ? -l : 0);
  const int64_t v = -(x * (q_erf + g.q_1));  // S_erf < 0: the sign folded into the value, the multiplier positive
  return output_code(v, g.out, g.rounding, g.out_zp, g.lo, g.hi);
}

/// Algorithm 3 (I-EXP, I-SOFTMAX) over rows of codes with scale `in_scale`, into
/// codes with `out_scale`, `out_zp` in [lo, hi]. Per row, on the working grid:
/// x = (q - max q) << k, clamped to >= -30 q_ln2 (q_ln2 = floor(ln2 / S));
/// z = floor(-x / q_ln2), q_p = x + z q_ln2; e = I-POLY(q_p; a = 0.3585,
/// b = 1.353, c = 0.344) >> z; then f = floor(2^62 / sum e) and the probability
/// p = (e f) >> 32 on scale 2^-30, rescaled to the output.
struct Softmax {
  int shift = 0;
  int64_t q_ln2 = 0;
  Poly exp;
  Rescale out;  ///< 2^-30 / out_scale
  int32_t out_zp = 0, lo = 0, hi = 0;
  Rounding rounding = Rounding::kHalfEven;
};
/// Throws DataError naming `what` for an input scale below 1e-6 (int64 would overflow).
Softmax make_softmax(double in_scale, double out_scale, int32_t out_zp, int32_t lo, int32_t hi, Rounding r, const char* what);
/// One row: `n` codes at x[0], x[stride], ... into y at the same positions.
/// `scratch` holds n values. Template over the 8-bit code types.
template <typename TI, typename TO>
void softmax_row(const TI* x, TO* y, int64_t n, int64_t stride, const Softmax& s, int64_t* scratch) {
  int32_t mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = x[i * stride] > mx ? x[i * stride] : mx;
  int64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = static_cast<int64_t>(x[i * stride] - mx) * (int64_t{1} << s.shift);
    if (v < -30 * s.q_ln2) v = -30 * s.q_ln2;
    const int64_t z = -v / s.q_ln2;  // v <= 0: truncation is floor
    scratch[i] = poly(v + z * s.q_ln2, s.exp) >> z;
    sum += scratch[i];
  }
  const int64_t f = (int64_t{1} << 62) / sum;  // sum >= the row maximum's e > 0
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = static_cast<int64_t>((static_cast<__int128>(scratch[i]) * f) >> 32);
    y[i * stride] = static_cast<TO>(output_code(p, s.out, s.rounding, s.out_zp, s.lo, s.hi));
  }
}

/// Integer-only layer normalisation over the last axis (I-BERT's IntLayerNorm with
/// Algorithm 4), codes with `in_scale` / `in_zp` into `out_scale` / `out_zp`. I-BERT
/// rounds the mean to an integer, an error of up to half an input code; here the row
/// is centred exactly, scaled by n: y = n x - sum x (x = q - zp). Then
/// s = isqrt(sum y^2 + e), e = floor(n^3 eps / in_scale^2 + 0.5); f = floor(2^31 / s)
/// (0 when s = 0); y_n = floor(y f / 2) on scale sqrt(n) / 2^30. Per position j of
/// the row: b_j = floor(beta_j / (gamma_j sqrt(n) / 2^30)) and the code is
/// rescale(y_n + b_j, |gamma_j| sqrt(n) / 2^30 / out_scale) (negated for gamma_j < 0);
/// gamma_j = 0 gives beta_j's code. n is at most 2^14 (sum y^2 stays below 2^63).
struct LayerNorm {
  int64_t n = 0;
  int32_t in_zp = 0;
  int64_t eps = 0;
  std::vector<int64_t> bias;       ///< b_j (n values)
  std::vector<Rescale> out;        ///< per position
  std::vector<int8_t> sign;        ///< +1, -1, or 0 for gamma_j = 0
  std::vector<int32_t> constant;   ///< gamma_j = 0: the code of beta_j
  int32_t out_zp = 0, lo = 0, hi = 0;
  Rounding rounding = Rounding::kHalfEven;
};
/// `gamma`, `beta`: n values each, or empty (1 and 0). Throws DataError naming `what`.
LayerNorm make_layer_norm(int64_t n, double in_scale, int32_t in_zp, double eps, const std::vector<float>& gamma,
                          const std::vector<float>& beta, double out_scale, int32_t out_zp, int32_t lo, int32_t hi,
                          Rounding r, const char* what);
/// One row of `ln.n` contiguous codes. `scratch` holds n values.
template <typename TI, typename TO>
void layer_norm_row(const TI* x, TO* y, const LayerNorm& ln, int64_t* scratch) {
  const int64_t n = ln.n;
  int64_t sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += static_cast<int64_t>(x[j]) - ln.in_zp;
  int64_t var = ln.eps;
  for (int64_t j = 0; j < n; ++j) {
    scratch[j] = n * (static_cast<int64_t>(x[j]) - ln.in_zp) - sum;
    var += scratch[j] * scratch[j];
  }
  const int64_t s = isqrt(var);
  const int64_t f = s > 0 ? (int64_t{1} << 31) / s : 0;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t yn = (scratch[j] * f) >> 1;  // arithmetic shift: floor
    y[j] = static_cast<TO>(ln.sign[j] == 0 ? ln.constant[j]
                                           : output_code(ln.sign[j] * (yn + ln.bias[j]), ln.out[j], ln.rounding, ln.out_zp,
                                                         ln.lo, ln.hi));
  }
}

// --- inline definitions -----------------------------------------------------------

inline int32_t rescale(int64_t acc, Rescale s, Rounding r) {
  const __int128 v = static_cast<__int128>(acc) * s.multiplier;
  __int128 q;
  switch (r) {
    case Rounding::kHalfUp: q = hd::rounding_shift_right_in<Rounding::kHalfUp, __int128>(v, s.shift); break;
    case Rounding::kHalfAwayFromZero:
      q = hd::rounding_shift_right_in<Rounding::kHalfAwayFromZero, __int128>(v, s.shift);
      break;
    default: q = hd::rounding_shift_right_in<Rounding::kHalfEven, __int128>(v, s.shift);
  }
  return static_cast<int32_t>(q < INT32_MIN ? INT32_MIN : (q > INT32_MAX ? INT32_MAX : q));
}

}  // namespace qfx::runtime::integer_only
