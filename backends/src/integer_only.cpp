// Constants of the integer-only GELU, softmax and layer normalisation
// (qfx/runtime/integer_only.h), computed once per op from its scales.
#include "qfx/runtime/integer_only.h"

#include <cmath>
#include <string>

#include "qfx/error.h"

namespace qfx::runtime::integer_only {
namespace {

// I-BERT's coefficients: erf (Algorithm 2) and exp on [-ln2, 0] (Algorithm 3).
constexpr double kErfA = -0.2888, kErfB = -1.769, kErfC = 1.0;
constexpr double kExpA = 0.3585, kExpB = 1.353, kExpC = 0.344;
constexpr double kLn2 = 0.6931471805599453;
constexpr double kMinScale = 1e-6;

void check_scale(double s, const char* what, const char* which) {
  if (!(s > 0) || !std::isfinite(s))
    throw DataError(std::string(what) + ": " + which + " scale " + std::to_string(s) + " is not a positive finite number");
}

void check_input_scale(double s, const char* what) {
  check_scale(s, what, "input");
  if (s < kMinScale)
    throw DataError(std::string(what) + ": input scale " + std::to_string(s) +
                    " is below 1e-6; the integer-only kernel would overflow 64 bits");
}

int64_t floor_to_int(double v) {
  const double f = std::floor(v);
  const double cap = 4.0e18;
  return static_cast<int64_t>(f < -cap ? -cap : (f > cap ? cap : f));
}

}  // namespace

Rescale make_rescale(double m, const char* what) {
  if (!(m > 0) || !std::isfinite(m) || m >= 2147483648.0)
    throw DataError(std::string(what) + ": rescale factor " + std::to_string(m) + " is outside (0, 2^31)");
  int e = 0;
  const double mant = std::frexp(m, &e);  // m = mant * 2^e, mant in [0.5, 1)
  int64_t mult = static_cast<int64_t>(std::floor(mant * 2147483648.0 + 0.5));
  if (mult == (int64_t{1} << 31)) {
    mult >>= 1;
    ++e;
  }
  return Rescale{mult, 31 - e};
}

int working_shift(double scale) {
  int k = 0;
  while (std::ldexp(scale, -k) > 1.0 / 1024.0) ++k;
  return k;
}

int64_t isqrt(int64_t n) {
  if (n <= 0) return 0;
  int bits = 0;
  for (int64_t v = n; v > 0; v >>= 1) ++bits;
  int64_t x = int64_t{1} << ((bits + 1) / 2);
  for (;;) {
    const int64_t next = (x + n / x) / 2;
    if (next >= x) return x;
    x = next;
  }
}

Poly make_poly(double a, double b, double c, double s) {
  Poly p;
  p.q_b = floor_to_int(b / s);
  p.q_c = floor_to_int(c / (a * s * s));
  p.scale = a * s * s;
  return p;
}

Gelu make_gelu(double in_scale, int32_t in_zp, double out_scale, int32_t out_zp, int32_t lo, int32_t hi, Rounding r,
               const char* what) {
  check_input_scale(in_scale, what);
  check_scale(out_scale, what, "output");
  Gelu g;
  g.shift = working_shift(in_scale);
  g.in_zp = in_zp;
  const double s = std::ldexp(in_scale, -g.shift);
  g.erf = make_poly(kErfA, kErfB, kErfC, s / std::sqrt(2.0));
  g.q_1 = floor_to_int(1.0 / g.erf.scale);
  g.out = make_rescale(-(s * g.erf.scale / 2.0) / out_scale, what);
  g.out_zp = out_zp;
  g.lo = lo;
  g.hi = hi;
  g.rounding = r;
  return g;
}

Softmax make_softmax(double in_scale, double out_scale, int32_t out_zp, int32_t lo, int32_t hi, Rounding r, const char* what) {
  check_input_scale(in_scale, what);
  check_scale(out_scale, what, "output");
  Softmax sm;
  sm.shift = working_shift(in_scale);
  const double s = std::ldexp(in_scale, -sm.shift);
  sm.q_ln2 = floor_to_int(kLn2 / s);
  sm.exp = make_poly(kExpA, kExpB, kExpC, s);
  sm.out = make_rescale(std::ldexp(1.0, -30) / out_scale, what);
  sm.out_zp = out_zp;
  sm.lo = lo;
  sm.hi = hi;
  sm.rounding = r;
  return sm;
}

LayerNorm make_layer_norm(int64_t n, double in_scale, int32_t in_zp, double eps, const std::vector<float>& gamma,
                          const std::vector<float>& beta, double out_scale, int32_t out_zp, int32_t lo, int32_t hi,
                          Rounding r, const char* what) {
  check_scale(in_scale, what, "input");
  check_scale(out_scale, what, "output");
  if (n < 1 || n > (int64_t{1} << 14))
    throw DataError(std::string(what) + ": normalized size " + std::to_string(n) + " is outside 1..2^14");
  auto sized = [&](const std::vector<float>& v, const char* which) {
    if (!v.empty() && static_cast<int64_t>(v.size()) != n)
      throw DataError(std::string(what) + ": " + which + " has " + std::to_string(v.size()) + " values for " + std::to_string(n));
  };
  sized(gamma, "weight");
  sized(beta, "bias");
  LayerNorm ln;
  ln.n = n;
  ln.in_zp = in_zp;
  const double nd = static_cast<double>(n);
  ln.eps = floor_to_int(nd * nd * nd * eps / (in_scale * in_scale) + 0.5);
  if (ln.eps < 0) ln.eps = 0;
  ln.out_zp = out_zp;
  ln.lo = lo;
  ln.hi = hi;
  ln.rounding = r;
  const double s_ln = std::sqrt(static_cast<double>(n)) / 1073741824.0;  // sqrt(n) / 2^30
  for (int64_t j = 0; j < n; ++j) {
    const double gj = gamma.empty() ? 1.0 : gamma[j], bj = beta.empty() ? 0.0 : beta[j];
    if (!std::isfinite(gj) || !std::isfinite(bj)) throw DataError(std::string(what) + ": weight or bias is not finite");
    if (gj == 0.0) {
      const double c = std::nearbyint(bj / out_scale) + out_zp;
      ln.constant.push_back(static_cast<int32_t>(c < lo ? lo : (c > hi ? hi : c)));
      ln.sign.push_back(0);
      ln.bias.push_back(0);
      ln.out.push_back({});
      continue;
    }
    const int64_t b = floor_to_int(bj / (gj * s_ln));
    const int64_t cap = int64_t{1} << 60;
    ln.bias.push_back(b < -cap ? -cap : (b > cap ? cap : b));
    ln.sign.push_back(gj > 0 ? 1 : -1);
    ln.out.push_back(make_rescale(std::fabs(gj) * s_ln / out_scale, what));
    ln.constant.push_back(0);
  }
  return ln;
}

}  // namespace qfx::runtime::integer_only
