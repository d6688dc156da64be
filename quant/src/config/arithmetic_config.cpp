// The `arithmetic` section of a backend YAML: the target's integer arithmetic
// (runtime::Arithmetic), checked with file:line:column errors.
#include <algorithm>
#include <map>

#include "qfx/quant/backend_config.h"
#include "qfx/quant/op_catalog.h"
#include "yaml_util.h"

namespace qfx::quant {
using namespace yaml;

namespace {

runtime::RequantMode mode(const std::string& path, const YAML::Node& n, const std::string& what) {
  const std::string m = as_choice(path, n, what, {"float", "fixed_point", "shift"});
  return m == "float" ? runtime::RequantMode::kFloat
         : m == "fixed_point" ? runtime::RequantMode::kFixedPoint
                              : runtime::RequantMode::kShift;
}

int bits(const std::string& path, const YAML::Node& n, const std::string& what, int lo, int hi) {
  const int64_t v = as_int(path, n, what);
  if (v < lo || v > hi) bad(path, n, what + " must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return static_cast<int>(v);
}

// qfx op names a `lut` (`integer_only`) entry may use, and the ONNX op each becomes:
// the op catalog's records with a table (integer-only) form.
std::map<std::string, std::string> catalog_forms(bool table) {
  std::map<std::string, std::string> m;
  for (const auto& [name, r] : op_catalog().records()) {
    const std::string& onnx = table ? r.table_onnx : r.integer_only_onnx;
    if (!onnx.empty()) m[name] = onnx;
  }
  return m;
}

// The ONNX ops of a list of qfx op names (`key`: lut or integer_only) that the
// target quantizes (fixed or quantized output); ConfigError naming the entry otherwise.
std::vector<std::string> onnx_ops(const std::string& path, const YAML::Node& l, const std::string& key,
                                  const std::map<std::string, std::string>& names, const BackendConfig& b) {
  std::vector<std::string> out;
  for (const auto& op : as_string_list(path, l, "arithmetic." + key)) {
    auto it = names.find(op);
    if (it == names.end()) {
      std::string known;
      for (const auto& kv : names) known += (known.empty() ? "" : ", ") + kv.first;
      bad(path, l, "arithmetic." + key + ": '" + op + "' has no " + (key == "lut" ? "lookup-table" : "integer-only") +
                       " form (known: " + known + ")");
    }
    const OpConfig oc = b.op(op);
    if (oc.kind != OpKind::kFixed && oc.kind != OpKind::kQuantized)
      bad(path, l, "arithmetic." + key + ": '" + op + "' runs in float on this target (ops." + op + " is " +
                       op_kind_name(oc.kind) + "); give it fixed output qparams ({fixed: [lo, hi]}) or make it quantized");
    out.push_back(it->second);
  }
  return out;
}

}  // namespace

runtime::Arithmetic read_arithmetic(const std::string& path, const YAML::Node& a, const BackendConfig& b) {
  check_keys(path, a, "arithmetic",
             {"requantize", "multiplier_bits", "rounding", "accumulator", "elementwise", "average_pool", "fully_connected_rounding",
              "lut", "integer_only", "softmax"});
  runtime::Arithmetic ar;
  if (auto r = a["requantize"]) ar.requantize = mode(path, r, "arithmetic.requantize");
  if (auto m = a["multiplier_bits"]) ar.multiplier_bits = bits(path, m, "arithmetic.multiplier_bits", 2, 32);
  if (auto r = a["rounding"]) {
    const std::string s = as_choice(path, r, "arithmetic.rounding", {"half_even", "half_away_from_zero", "half_up"});
    ar.rounding = s == "half_even" ? runtime::Rounding::kHalfEven
                  : s == "half_up" ? runtime::Rounding::kHalfUp
                                   : runtime::Rounding::kHalfAwayFromZero;
  }
  if (auto acc = a["accumulator"]) {
    check_keys(path, acc, "arithmetic.accumulator", {"bits", "overflow"});
    if (auto n = acc["bits"]) ar.accumulator_bits = bits(path, n, "arithmetic.accumulator.bits", 8, 32);
    if (auto o = acc["overflow"])
      ar.overflow = as_choice(path, o, "arithmetic.accumulator.overflow", {"saturate", "wrap"}) == "wrap"
                        ? runtime::Overflow::kWrap
                        : runtime::Overflow::kSaturate;
  }
  if (auto e = a["elementwise"]) {
    check_keys(path, e, "arithmetic.elementwise", {"requantize", "multiplier_bits", "left_shift"});
    if (auto r = e["requantize"]) ar.elementwise = mode(path, r, "arithmetic.elementwise.requantize");
    if (auto m = e["multiplier_bits"]) ar.elementwise_multiplier_bits = bits(path, m, "arithmetic.elementwise.multiplier_bits", 2, 32);
    if (auto l = e["left_shift"]) ar.elementwise_left_shift = bits(path, l, "arithmetic.elementwise.left_shift", 0, 22);
  }
  if (auto p = a["average_pool"])
    ar.average_pool_divide = as_choice(path, p, "arithmetic.average_pool", {"rescale", "divide"}) == "divide";
  if (auto f = a["fully_connected_rounding"])
    ar.fully_connected_single_rounding = as_choice(path, f, "arithmetic.fully_connected_rounding", {"double", "single"}) == "single";
  if (auto l = a["lut"]) ar.lut = onnx_ops(path, l, "lut", catalog_forms(true), b);
  if (auto l = a["integer_only"]) ar.integer_only = onnx_ops(path, l, "integer_only", catalog_forms(false), b);
  if (auto sm = a["softmax"]) {
    ar.softmax_fixed_point = as_choice(path, sm, "arithmetic.softmax", {"float", "fixed_point"}) == "fixed_point";
    const OpConfig oc = b.op("softmax");
    if (ar.softmax_fixed_point && (oc.kind != OpKind::kFixed || oc.fixed_lo != 0.0f || oc.fixed_hi != 1.0f))
      bad(path, sm, "arithmetic.softmax: fixed_point computes outputs in steps of 1/256 from the lowest code; give "
                    "ops.softmax the fixed output range {fixed: [0.0, 1.0]}");
    if (ar.softmax_fixed_point && std::find(ar.integer_only.begin(), ar.integer_only.end(), "Softmax") != ar.integer_only.end())
      bad(path, sm, "arithmetic.softmax: fixed_point and integer_only: [softmax] both say how softmax runs; keep one");
  }
  const bool shift = ar.requantize == runtime::RequantMode::kShift || ar.elementwise == runtime::RequantMode::kShift;
  if (shift && !b.power_of_two_scale)
    bad(path, a, "arithmetic: 'shift' requantization needs power-of-two scales (scale: {power_of_two: true})");
  if (ar.requantize == runtime::RequantMode::kFloat && ar.elementwise == runtime::RequantMode::kFloat && a["rounding"] &&
      ar.rounding != runtime::Rounding::kHalfEven)
    bad(path, a["rounding"], "arithmetic.rounding: float requantization rounds half to even (ONNX); other roundings need fixed_point or shift");
  return ar;
}

}  // namespace qfx::quant
