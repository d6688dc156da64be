// BackendConfig and QConfigMapping: the shipped YAML files, precedence, and the
// errors for bad files and for qconfigs a backend cannot honour.
#include <gtest/gtest.h>

#include "../common/scratch_dir.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "qfx/error.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/qconfig.h"

using namespace qfx::quant;

namespace {

std::string backends_dir() { return std::string(QFX_SOURCE_DIR) + "/configs/backends"; }

// Writes `text` to a temporary YAML file; returns its path.
std::string write_yaml(const std::string& name, const std::string& text) {
  auto p = std::filesystem::path(qfx::test::scratch_path()) / ("qfx_qconfig_test_" + name + ".yaml");
  std::ofstream(p) << text;
  return p.string();
}

std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const qfx::ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

}  // namespace

TEST(BackendConfig, ShippedFilesLoad) {
  auto one = BackendConfig::load(backends_dir() + "/onednn.yaml");
  EXPECT_EQ(one.name, "onednn");
  EXPECT_EQ(one.activation.dtypes.front(), QDType::kUInt8);
  EXPECT_TRUE(one.weight.per_channel_default);
  EXPECT_EQ(one.op("conv2d").kind, OpKind::kWeighted);
  EXPECT_EQ(one.op("max_pool2d").kind, OpKind::kShare);
  EXPECT_EQ(one.op("sigmoid").kind, OpKind::kFixed);
  EXPECT_EQ(one.op("not_listed").kind, OpKind::kFloat);
  EXPECT_TRUE(one.has_fusion({"conv2d", "batchnorm2d", "relu"}));

  auto acc = BackendConfig::load(backends_dir() + "/example_accel.yaml");
  EXPECT_EQ(acc.activation.dtypes, (std::vector<QDType>{QDType::kInt8, QDType::kInt16}));  // s16 where asked
  EXPECT_EQ(acc.activation.qschemes, std::vector<QScheme>{QScheme::kSymmetric});
  EXPECT_FALSE(acc.weight.per_channel_allowed);
  EXPECT_TRUE(acc.power_of_two_scale);
  EXPECT_TRUE(acc.has_fusion({"conv2d", "batchnorm2d", "relu6"}));
  EXPECT_EQ(acc.op("sigmoid").kind, OpKind::kFixed);
  EXPECT_EQ(acc.op("softmax").kind, OpKind::kFloat);
  EXPECT_EQ(acc.arithmetic.requantize, qfx::runtime::RequantMode::kShift);
  EXPECT_EQ(acc.arithmetic.rounding, qfx::runtime::Rounding::kHalfUp);
  EXPECT_EQ(acc.arithmetic.accumulator_bits, 24);
  EXPECT_EQ(acc.arithmetic.elementwise, qfx::runtime::RequantMode::kFixedPoint);
  EXPECT_EQ(acc.arithmetic.elementwise_multiplier_bits, 16);
  EXPECT_EQ(acc.arithmetic.lut, (std::vector<std::string>{"Sigmoid", "HardSigmoid", "HardSwish", "Tanh"}));
  auto tfl = BackendConfig::resolve("tflite_like");
  EXPECT_EQ(tfl.arithmetic.requantize, qfx::runtime::RequantMode::kFixedPoint);
  EXPECT_EQ(tfl.arithmetic.multiplier_bits, 32);
  EXPECT_EQ(tfl.arithmetic.rounding, qfx::runtime::Rounding::kHalfAwayFromZero);
  EXPECT_EQ(tfl.arithmetic.elementwise_left_shift, 20);
  EXPECT_TRUE(tfl.arithmetic.softmax_fixed_point);
  EXPECT_EQ(tfl.op("softmax").kind, OpKind::kFixed);
  auto eu = BackendConfig::resolve("ethos_u");
  qfx::runtime::Arithmetic eu_arith = eu.arithmetic;
  EXPECT_EQ(eu_arith.lut, (std::vector<std::string>{"Sigmoid", "Tanh"})) << "HardSwish stays float on ethos_u";
  eu_arith.lut = tfl.arithmetic.lut;
  EXPECT_EQ(eu_arith.to_json(), tfl.arithmetic.to_json()) << "Ethos-U computes TFLite's reference arithmetic";
  EXPECT_EQ(eu.op("hardswish").kind, OpKind::kFloat);
  EXPECT_TRUE(one.arithmetic.is_float()) << "no arithmetic section: ONNX's";
  auto npu = BackendConfig::resolve("transformer_npu");
  EXPECT_EQ(npu.arithmetic.integer_only, (std::vector<std::string>{"Gelu", "Softmax", "LayerNormalization"}));
  EXPECT_EQ(npu.op("layer_norm").kind, OpKind::kQuantized);
  EXPECT_FALSE(npu.arithmetic.is_float());
  EXPECT_EQ(qfx::runtime::Arithmetic::from_json(npu.arithmetic.to_json(), "test").integer_only, npu.arithmetic.integer_only);

  auto ref = BackendConfig::resolve("reference");
  EXPECT_EQ(ref.name, "reference");
  EXPECT_EQ(BackendConfig::resolve(backends_dir() + "/example_accel.yaml").name, "example_accel");
}

TEST(BackendConfig, UnknownBackendListsTheAvailableOnes) {
  const std::string msg = config_error([] { BackendConfig::resolve("tpu9000"); });
  EXPECT_NE(msg.find("tpu9000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("onednn"), std::string::npos) << msg;
  EXPECT_NE(msg.find("example_accel"), std::string::npos) << msg;
}

TEST(BackendConfig, BadFilesNameFileLineAndColumn) {
  const std::string head = "name: x\nactivation: {dtypes: [u8]}\nweight: {dtypes: [s8]}\n";
  struct Bad {
    const char* name;
    std::string text;
    const char* where;  // expected "file:line:column" suffix
    const char* what;
  } cases[] = {
      {"unknown_key", head + "colour: red\n", ":4:1", "unknown key 'colour'"},
      {"bad_dtype", "name: x\nactivation: {dtypes: [u7]}\nweight: {dtypes: [s8]}\n", ":2:22", "u7"},
      {"bad_op", head + "ops:\n  conv9d: weighted\n", ":5:3", "unknown op 'conv9d'"},
      {"bad_kind", head + "ops:\n  add: fast\n", ":5:8", "fast"},
      {"weighted_add", head + "ops:\n  add: weighted\n", ":5:8", "no weights"},
      {"shared_lstm", head + "ops:\n  lstm: share\n", ":5:9", "'lstm' has weights"},
      {"fixed_conv", head + "ops:\n  conv2d: {fixed: [0.0, 1.0]}\n", ":5:11", "'conv2d' has weights"},
      {"bad_fusion", head + "fusions:\n  - [relu, conv2d]\n", ":5:5", "must start with a conv"},
      {"bad_elementwise_fusion", head + "fusions:\n  - [add, sigmoid]\n", ":5:5", "[add|mul, relu|relu6]"},
      {"bad_scale", head + "scale: {power_of_two: maybe}\n", ":4:23", "true or false"},
      {"bad_fixed", head + "ops:\n  sigmoid: {fixed: [1.0, 0.0]}\n", ":5:20", "hi must be greater"},
      {"syntax", head + "ops: [\n", ":5:1", "YAML syntax error"},
      {"arith_mode", head + "arithmetic:\n  requantize: fixed\n", ":5:15", "fixed"},
      {"arith_key", head + "arithmetic:\n  multiplier: 32\n", ":5:3", "unknown key 'multiplier'"},
      {"arith_bits", head + "arithmetic:\n  accumulator: {bits: 40}\n", ":5:23", "between 8 and 32"},
      {"arith_shift_needs_pow2", head + "arithmetic:\n  requantize: shift\n", ":5:3", "power-of-two scales"},
      {"arith_lut_float_op", head + "ops:\n  sigmoid: float\narithmetic:\n  lut: [sigmoid]\n", ":7:8", "runs in float on this target"},
      {"arith_lut_unknown", head + "ops:\n  softmax: {fixed: [0, 1]}\narithmetic:\n  lut: [softmax]\n", ":7:8", "no lookup-table form"},
      {"arith_float_rounding", head + "arithmetic:\n  rounding: half_up\n", ":5:13", "rounds half to even"},
      {"arith_integer_only_unknown", head + "ops:\n  sigmoid: {fixed: [0, 1]}\narithmetic:\n  integer_only: [sigmoid]\n", ":7:17",
       "'sigmoid' has no integer-only form (known: gelu, layer_norm, softmax)"},
      {"arith_integer_only_float_op", head + "ops:\n  layer_norm: float\narithmetic:\n  integer_only: [layer_norm]\n", ":7:17",
       "'layer_norm' runs in float on this target"},
      {"arith_softmax_mode", head + "ops:\n  softmax: {fixed: [0, 1]}\narithmetic:\n  softmax: table\n", ":7:12", "table"},
      {"arith_softmax_float_op", head + "ops:\n  softmax: float\narithmetic:\n  softmax: fixed_point\n", ":7:12",
       "give ops.softmax the fixed output range {fixed: [0.0, 1.0]}"},
      {"arith_softmax_calibrated", head + "ops:\n  softmax: quantized\narithmetic:\n  softmax: fixed_point\n", ":7:12",
       "steps of 1/256"},
      {"arith_softmax_twice", head + "ops:\n  softmax: {fixed: [0, 1]}\narithmetic:\n  integer_only: [softmax]\n  softmax: fixed_point\n",
       ":8:12", "keep one"},
      {"mac_cost_name", head + "mac_cost: {w8a8: 1, int8: 2}\n", ":4:21", "'int8' is not a precision"},
      {"mac_cost_zero", head + "mac_cost: {w8a8: 0}\n", ":4:18", "mac_cost.w8a8 must be positive"},
      {"mac_cost_list", head + "mac_cost: [1, 2]\n", ":4:11", "mac_cost must be a mapping"},
  };
  for (const auto& c : cases) {
    const std::string p = write_yaml(c.name, c.text);
    const std::string msg = config_error([&] { BackendConfig::load(p); });
    EXPECT_NE(msg.find(p + c.where), std::string::npos) << c.name << ": " << msg << "\n";
    EXPECT_NE(msg.find(c.what), std::string::npos) << c.name << ": " << msg;
  }
  EXPECT_THROW(BackendConfig::load("/nonexistent/backend.yaml"), qfx::IoError);
  const BackendConfig costs = BackendConfig::load(write_yaml("mac_cost", head + "mac_cost: {w4a8: 0.5, w8a16: 2}\n"));
  EXPECT_EQ(costs.mac_cost, (std::map<std::string, double>{{"w4a8", 0.5}, {"w8a16", 2.0}}));
}

TEST(QConfigMapping, PrecedenceIsNameThenRegexThenTypeThenGlobal) {
  auto g = std::make_shared<QConfig>();
  auto t = std::make_shared<QConfig>();
  auto r = std::make_shared<QConfig>();
  auto n = std::make_shared<QConfig>();
  QConfigMapping m;
  m.set_global(g).set_object_type("Conv2d", t).set_module_name_regex("layer[0-9]+\\.0\\..*", r).set_module_name("layer1", n);
  std::string by;
  EXPECT_EQ(m.resolve("stem.conv", "Conv2d", &by), t);
  EXPECT_EQ(by, "module_type:Conv2d");
  EXPECT_EQ(m.resolve("layer2.0.conv1", "Conv2d", &by), r);
  EXPECT_EQ(by, "module_name_regex:layer[0-9]+\\.0\\..*");
  EXPECT_EQ(m.resolve("layer1.0.conv1", "Conv2d", &by), n) << "a parent's module_name wins over regex and type";
  EXPECT_EQ(by, "module_name:layer1");
  EXPECT_EQ(m.resolve("fc", "Linear", &by), g);
  EXPECT_EQ(by, "global");
  m.set_module_name("fc", nullptr);
  EXPECT_EQ(m.resolve("fc", "Linear"), nullptr) << "null keeps a module float";
}

// Patterns come from config files: matching is linear (a catastrophic-backtracking
// pattern on a 200,000-character module path returns at once, with the right
// answer), and a pattern whose automaton would need more memory than allowed is
// refused when it is set, with the reason.
TEST(QConfigMapping, RegexFromAConfigCannotRunAway) {
  auto g = std::make_shared<QConfig>();
  auto r = std::make_shared<QConfig>();
  QConfigMapping m;
  m.set_global(g).set_module_name_regex("(a*)*b", r);
  EXPECT_EQ(m.resolve(std::string(200000, 'a'), "Conv2d"), g);
  EXPECT_EQ(m.resolve(std::string(200000, 'a') + "b", "Conv2d"), r);
  try {
    m.set_module_name_regex("((((a{100}){100}){100}){100})", r);
    FAIL() << "expected qfx::ArgumentError";
  } catch (const qfx::ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("bad regular expression"), std::string::npos) << e.what();
  }
}

TEST(QConfigMapping, LoadsYamlWithNullsAndOverrides) {
  const std::string p = write_yaml("qc_ok", R"(
qconfig:
  global:
    activation: {observer: histogram, algorithm: entropy}
    weight: {granularity: per_channel, bits: 8}
  module_type:
    Linear: null
  module_name_regex:
    "head\\..*": {weight: {bits: 4}}
  module_name:
    stem: {activation: {algorithm: percentile, percentile: 99.9}}
)");
  auto m = QConfigMapping::load(p);
  EXPECT_EQ(m.resolve("fc", "Linear"), nullptr);
  auto g = m.resolve("layer1.conv", "Conv2d");
  ASSERT_TRUE(g);
  EXPECT_EQ(*g->activation.algorithm, Algorithm::kEntropy);
  EXPECT_EQ(*m.resolve("head.cls", "Conv2d")->weight.bits, 4);
  auto s = m.resolve("stem", "Conv2d");
  EXPECT_EQ(*s->activation.algorithm, Algorithm::kPercentile);
  EXPECT_DOUBLE_EQ(*s->activation.percentile, 99.9);
  auto spec = resolve_tensor_qconfig(s->activation, BackendConfig::resolve("onednn"), false, false, "stem");
  EXPECT_EQ(spec.kind, ObserverKind::kHistogram) << "PTQ activations default to histograms";
  EXPECT_EQ(spec.options.percentile, 99.9);
}

TEST(QConfigMapping, BadYamlNamesFileLineAndColumn) {
  struct Bad {
    const char* name;
    const char* text;
    const char* where;
    const char* what;
  } cases[] = {
      {"unknown", "qconfig:\n  globl: null\n", ":2:3", "unknown key 'globl'"},
      {"bits", "qconfig:\n  global: {weight: {bits: 9}}\n", ":2:27", "between 2 and 8"},
      {"bits_type", "qconfig:\n  global: {weight: {bits: eight}}\n", ":2:27", "must be an integer"},
      {"algo", "qconfig:\n  global: {activation: {algorithm: magic}}\n", ":2:36", "magic"},
      {"algo_needs_hist", "qconfig:\n  global: {activation: {observer: minmax, algorithm: mse}}\n", ":2:54", "needs observer: histogram"},
      {"regex", "qconfig:\n  module_name_regex: {\"(\": null}\n", ":2:23", "bad regular expression"},
      {"percentile", "qconfig:\n  global: {activation: {percentile: 20}}\n", ":2:37", "between 50 and 100"},
  };
  for (const auto& c : cases) {
    const std::string p = write_yaml(c.name, c.text);
    const std::string msg = config_error([&] { QConfigMapping::load(p); });
    EXPECT_NE(msg.find(p + c.where), std::string::npos) << c.name << ": " << msg << "\n";
    EXPECT_NE(msg.find(c.what), std::string::npos) << c.name << ": " << msg;
  }
}

TEST(QConfigMapping, BackendConstraintsAreErrorsNamingNodeAndConstraint) {
  auto acc = BackendConfig::resolve("example_accel");
  TensorQConfig pc;
  pc.per_channel = true;
  std::string msg = config_error([&] { resolve_tensor_qconfig(pc, acc, true, false, "layer1_0_conv1"); });
  EXPECT_NE(msg.find("layer1_0_conv1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("per-channel"), std::string::npos) << msg;
  TensorQConfig u8;
  u8.dtype = QDType::kUInt8;
  msg = config_error([&] { resolve_tensor_qconfig(u8, acc, false, false, "relu_3"); });
  EXPECT_NE(msg.find("relu_3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("u8"), std::string::npos) << msg;
  TensorQConfig affine;
  affine.qscheme = QScheme::kAffine;
  msg = config_error([&] { resolve_tensor_qconfig(affine, acc, false, false, "add_1"); });
  EXPECT_NE(msg.find("affine"), std::string::npos) << msg;
  TensorQConfig two;
  two.bits = 2;
  msg = config_error([&] { resolve_tensor_qconfig(two, acc, true, false, "fc"); });
  EXPECT_NE(msg.find("2-bit"), std::string::npos) << msg;
  // What it can do: 4-bit per-tensor weights with power-of-two scales.
  TensorQConfig four;
  four.bits = 4;
  auto s = resolve_tensor_qconfig(four, acc, true, false, "fc");
  EXPECT_EQ(s.spec.quant_min, -8);
  EXPECT_EQ(s.spec.quant_max, 7);
  EXPECT_TRUE(s.spec.power_of_two);
  EXPECT_FALSE(s.spec.per_channel);
}
