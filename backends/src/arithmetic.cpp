// Target arithmetic: fixed-point primitives (after gemmlowp's fixedpoint.h and
// TFLite's QuantizeMultiplier / MultiplyByQuantizedMultiplier), the Requantizer
// every integer kernel uses, and the JSON form carried in ONNX metadata.
#include "qfx/runtime/arithmetic.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "qfx/error.h"
#include "qfx/runtime/op_schema.h"
#include "qfx/runtime/kernel.h"

namespace qfx::runtime {
namespace {

template <typename E>
E parse_enum(const std::string& s, const std::vector<std::pair<const char*, E>>& names, const std::string& what,
             const char* key) {
  std::string known;
  for (const auto& [n, e] : names) {
    if (s == n) return e;
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  throw DataError(what + ": arithmetic." + key + " '" + s + "' is not one of " + known);
}

const std::vector<std::pair<const char*, Rounding>> kRoundings = {
    {"half_even", Rounding::kHalfEven}, {"half_away_from_zero", Rounding::kHalfAwayFromZero}, {"half_up", Rounding::kHalfUp}};
const std::vector<std::pair<const char*, RequantMode>> kModes = {
    {"float", RequantMode::kFloat}, {"fixed_point", RequantMode::kFixedPoint}, {"shift", RequantMode::kShift}};
const std::vector<std::pair<const char*, Overflow>> kOverflows = {{"saturate", Overflow::kSaturate}, {"wrap", Overflow::kWrap}};

}  // namespace

const char* rounding_name(Rounding r) {
  for (const auto& [n, e] : kRoundings)
    if (e == r) return n;
  return "?";
}
const char* requant_mode_name(RequantMode m) {
  for (const auto& [n, e] : kModes)
    if (e == m) return n;
  return "?";
}
const char* overflow_name(Overflow o) {
  for (const auto& [n, e] : kOverflows)
    if (e == o) return n;
  return "?";
}

bool Arithmetic::is_float() const {
  return requantize == RequantMode::kFloat && accumulator_bits == 32 && elementwise == RequantMode::kFloat && lut.empty() &&
         integer_only.empty() && !average_pool_divide && !fully_connected_single_rounding && !softmax_fixed_point;
}

std::string Arithmetic::describe() const {
  auto mode = [&](RequantMode m, int bits) {
    std::string s = requant_mode_name(m);
    if (m == RequantMode::kFixedPoint) s += " (" + std::to_string(bits) + "-bit multiplier)";
    return s;
  };
  std::string s = "requantize " + mode(requantize, multiplier_bits);
  if (requantize != RequantMode::kFloat || elementwise != RequantMode::kFloat) s += std::string(", rounding ") + rounding_name(rounding);
  s += ", accumulator " + std::to_string(accumulator_bits) + " bits";
  if (accumulator_bits < 32) s += std::string(" (") + overflow_name(overflow) + ")";
  s += ", elementwise " + mode(elementwise, elementwise_multiplier_bits);
  if (elementwise != RequantMode::kFloat) s += " left shift " + std::to_string(elementwise_left_shift);
  if (average_pool_divide) s += ", average pool divides";
  if (fully_connected_single_rounding) s += ", fully connected rounds once";
  if (softmax_fixed_point) s += ", softmax fixed point";
  if (!lut.empty()) {
    s += ", lut";
    for (const auto& o : lut) s += " " + o;
  }
  if (!integer_only.empty()) {
    s += ", integer-only";
    for (const auto& o : integer_only) s += " " + o;
  }
  return s;
}

std::string Arithmetic::to_json() const {
  nlohmann::json j = {{"requantize", requant_mode_name(requantize)},
                      {"multiplier_bits", multiplier_bits},
                      {"rounding", rounding_name(rounding)},
                      {"accumulator_bits", accumulator_bits},
                      {"overflow", overflow_name(overflow)},
                      {"elementwise", requant_mode_name(elementwise)},
                      {"elementwise_multiplier_bits", elementwise_multiplier_bits},
                      {"elementwise_left_shift", elementwise_left_shift},
                      {"lut", lut}};
  if (!integer_only.empty()) j["integer_only"] = integer_only;  // absent: models written before it load unchanged
  if (average_pool_divide) j["average_pool"] = "divide";
  if (fully_connected_single_rounding) j["fully_connected_rounding"] = "single";
  if (softmax_fixed_point) j["softmax"] = "fixed_point";
  return j.dump();
}

Arithmetic Arithmetic::from_json(const std::string& text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(what + ": arithmetic is not JSON: " + e.what());
  }
  if (!j.is_object()) throw DataError(what + ": arithmetic must be a JSON object");
  Arithmetic a;
  auto str = [&](const std::string& k) {
    if (!j[k].is_string()) throw DataError(what + ": arithmetic." + k + " must be a string");
    return j[k].get<std::string>();
  };
  auto integer = [&](const std::string& k) {
    if (!j[k].is_number_integer()) throw DataError(what + ": arithmetic." + k + " must be an integer");
    const int64_t v = j[k].get<int64_t>();
    if (v < -1000 || v > 1000) throw DataError(what + ": arithmetic." + k + " = " + std::to_string(v) + " is out of range");
    return static_cast<int>(v);
  };
  // A key of two values: false for `off`, true for `on`.
  auto two_way = [&](const std::string& k, const char* off, const char* on) {
    const std::string v = str(k);
    if (v != off && v != on) throw DataError(what + ": arithmetic." + k + " '" + v + "' is not one of " + off + ", " + on);
    return v == on;
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "requantize") a.requantize = parse_enum(str(k), kModes, what, "requantize");
    else if (k == "multiplier_bits") a.multiplier_bits = integer(k);
    else if (k == "rounding") a.rounding = parse_enum(str(k), kRoundings, what, "rounding");
    else if (k == "accumulator_bits") a.accumulator_bits = integer(k);
    else if (k == "overflow") a.overflow = parse_enum(str(k), kOverflows, what, "overflow");
    else if (k == "elementwise") a.elementwise = parse_enum(str(k), kModes, what, "elementwise");
    else if (k == "elementwise_multiplier_bits") a.elementwise_multiplier_bits = integer(k);
    else if (k == "elementwise_left_shift") a.elementwise_left_shift = integer(k);
    else if (k == "average_pool") a.average_pool_divide = two_way(k, "rescale", "divide");
    else if (k == "fully_connected_rounding") a.fully_connected_single_rounding = two_way(k, "double", "single");
    else if (k == "softmax") a.softmax_fixed_point = two_way(k, "float", "fixed_point");
    else if (k == "lut" || k == "integer_only") {
      if (!it.value().is_array()) throw DataError(what + ": arithmetic." + k + " must be a list of ONNX op types");
      for (const auto& o : it.value()) {
        if (!o.is_string()) throw DataError(what + ": arithmetic." + k + " must be a list of ONNX op types");
        (k == "lut" ? a.lut : a.integer_only).push_back(o.get<std::string>());
      }
    } else {
      throw DataError(what + ": unknown arithmetic key '" + k + "'");
    }
  }
  a.validate(what);
  return a;
}

void Arithmetic::validate(const std::string& what) const {
  auto range = [&](const char* key, int v, int lo, int hi) {
    if (v < lo || v > hi)
      throw DataError(what + ": arithmetic." + key + " = " + std::to_string(v) + " is outside " + std::to_string(lo) +
                      ".." + std::to_string(hi));
  };
  range("multiplier_bits", multiplier_bits, 2, 32);
  range("elementwise_multiplier_bits", elementwise_multiplier_bits, 2, 32);
  range("accumulator_bits", accumulator_bits, 8, 32);
  range("elementwise_left_shift", elementwise_left_shift, 0, 22);
  if (requantize == RequantMode::kFloat && elementwise == RequantMode::kFloat && rounding != Rounding::kHalfEven)
    throw DataError(what + ": arithmetic.rounding " + rounding_name(rounding) +
                    " has no effect with float requantization (ONNX rounds half to even); use fixed_point or shift");
  auto known_ops = [&](const std::vector<std::string>& ops, const std::vector<std::string>& known, const char* key) {
    for (const auto& o : ops)
      if (std::find(known.begin(), known.end(), o) == known.end()) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        throw DataError(what + ": arithmetic." + key + " op '" + o + "' is not one of " + list);
      }
  };
  known_ops(lut, lut_op_types(), "lut");
  known_ops(integer_only, integer_only_op_types(), "integer_only");
  if (softmax_fixed_point && std::find(integer_only.begin(), integer_only.end(), "Softmax") != integer_only.end())
    throw DataError(what + ": arithmetic.softmax fixed_point and integer_only Softmax both say how Softmax runs; keep one");
}

// --- primitives ---------------------------------------------------------------------

QuantizedMultiplier quantize_multiplier(double m, int bits) {
  if (bits < 2 || bits > 32) throw DataError("quantize_multiplier: " + std::to_string(bits) + "-bit multiplier (2..32)");
  if (!(m >= 0.0) || !std::isfinite(m)) throw DataError("quantize_multiplier: multiplier " + std::to_string(m) + " is negative or not finite");
  if (m == 0.0) return {};
  int shift = 0;
  const double q = std::frexp(m, &shift);  // m = q * 2^shift, q in [0.5, 1)
  int64_t mi = static_cast<int64_t>(std::round(q * static_cast<double>(int64_t{1} << (bits - 1))));
  if (mi == (int64_t{1} << (bits - 1))) {
    mi /= 2;
    ++shift;
  }
  if (shift < -31) return {};  // TFLite: the product then rounds to 0 for every int32 x
  return {static_cast<int32_t>(mi), shift};
}

// --- Requantizer ------------------------------------------------------------------------

Requantizer::Requantizer(RequantMode mode, int bits, Rounding rounding, int acc_bits, Overflow overflow,
                         std::vector<float> mult, const std::string& where, const std::vector<double>& exact)
    : mode_(mode), bits_(bits), rounding_(rounding), acc_bits_(acc_bits), overflow_(overflow), mult_(std::move(mult)) {
  if (mode_ == RequantMode::kFloat) return;
  if (!exact.empty() && exact.size() != mult_.size())
    throw InternalError(where + ": " + std::to_string(exact.size()) + " exact multipliers for " + std::to_string(mult_.size()));
  for (size_t i = 0; i < mult_.size(); ++i) {
    const float m = mult_[i];
    if (!(m > 0.0f) || !std::isfinite(m))
      throw DataError(where + ": requantization multiplier " + std::to_string(m) + " is not positive and finite");
    if (mode_ == RequantMode::kFixedPoint) {
      q_.push_back(quantize_multiplier(exact.empty() ? static_cast<double>(m) : exact[i], bits_));
      continue;
    }
    int e = 0;
    const double frac = std::frexp(static_cast<double>(m), &e);
    if (frac != 0.5)
      throw DataError(where + ": target arithmetic 'shift' needs a power-of-two multiplier (input scale x weight scale / "
                              "output scale), got " + std::to_string(m) +
                      "; use power-of-two scales (scale.power_of_two) or requantize: fixed_point");
    q_.push_back({1, e - 1});  // m = 2^(e-1)
  }
}

Requantizer Requantizer::accumulator(const Arithmetic& ar, std::vector<float> mult, const std::string& where,
                                     const std::vector<double>& exact) {
  return Requantizer(ar.requantize, ar.multiplier_bits, ar.rounding, ar.accumulator_bits, ar.overflow, std::move(mult), where,
                     exact);
}

Requantizer Requantizer::pooling(const Arithmetic& ar, std::vector<float> mult, const std::string& where) {
  return Requantizer(ar.elementwise, ar.elementwise_multiplier_bits, ar.rounding, ar.accumulator_bits, ar.overflow,
                     std::move(mult), where);
}

Requantizer Requantizer::rescale(const Arithmetic& ar, std::vector<float> mult, const std::string& where,
                                 const std::vector<double>& exact) {
  return Requantizer(ar.elementwise, ar.elementwise_multiplier_bits, ar.rounding, 32, Overflow::kSaturate, std::move(mult),
                     where, exact);
}

}  // namespace qfx::runtime
