// BackendConfig: what a target runs in int8 and how, as data (YAML in
// configs/backends/), in the spirit of torch.ao.quantization.backend_config.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qfx/quant/qparams.h"
#include "qfx/runtime/arithmetic.h"

namespace qfx::quant {

/// What a backend accepts for one kind of tensor (activations or weights).
struct TensorConstraints {
  std::vector<QDType> dtypes;    ///< allowed containers; the first is the default
  std::vector<QScheme> qschemes; ///< allowed schemes; the first is the default
  bool per_channel_allowed = false;
  bool per_tensor_allowed = true;
  bool per_channel_default = false;
  int64_t ch_axis = 0;           ///< channel axis of per-channel weights
  int min_bits = 2;              ///< narrowest quant range accepted (bits)
  int max_bits = 8;
  /// Bits used when a qconfig does not say; 0 means "native": what the runtime's
  /// oneDNN int8 kernels run exactly on this CPU (runtime::native_int8_weight_bits()).
  int default_bits = 8;
  /// Block-wise weights (`granularity: per_block` in a qconfig) allowed: a target that
  /// lists its granularities takes them only if it lists per_block.
  bool per_block_allowed = true;
  /// Block sizes the target takes for block-wise weights; empty: any (8..4096).
  std::vector<int64_t> block_sizes;
};

/// How an op takes part in quantization on this backend.
enum class OpKind {
  kWeighted,   ///< conv/linear family: quantized input, weights, s32 bias; quantized output
  kQuantized,  ///< inputs and output quantized with their own qparams (add, mul, ...)
  kShare,      ///< output shares the input's qparams (maxpool, flatten, reshape);
               ///< for several inputs (cat) all inputs and the output share one set
  kFixed,      ///< fixed output qparams from a known range (sigmoid, tanh, softmax)
  kFloat,      ///< runs in float: dequantize before, quantize after if needed
};
/// "weighted", "quantized", "share", "fixed", "float".
const char* op_kind_name(OpKind k);

/// One op entry of a backend.
struct OpConfig {
  OpKind kind = OpKind::kFloat;
  float fixed_lo = 0.0f, fixed_hi = 1.0f;  ///< kFixed: the output range
};

/// A target description.
///
/// YAML (every key is checked; see configs/backends/*.yaml):
/// ```yaml
/// name: onednn
/// description: free text
/// runtime: onednn               # the runtime backend its int8 model runs on (default onednn);
///                               # or {backend: my_npu, plugins: [libmy_npu.so]} (paths relative to the file)
/// activation: {dtypes: [u8], qschemes: [affine, symmetric], min_bits: 8}
/// weight: {dtypes: [s8], qschemes: [symmetric], granularity: [per_channel, per_tensor], ch_axis: 0}
/// bias: s32
/// scale: {power_of_two: false, min: 1.0e-8, max: 1.0e4}
/// fusions:                       # op sequences fused into one module (conv first),
///   - [conv2d, batchnorm2d, relu]  # or observed once at their end ([add|mul, relu|relu6],
///   - [add, relu]                  # torch.ao's add-relu patterns: no observer between them)
/// ops:                           # everything not listed runs in float
///   conv2d: weighted
///   add: quantized
///   max_pool2d: share
///   sigmoid: {fixed: [0.0, 1.0]}
///   softmax: float
/// arithmetic:                    # optional: the target's integer arithmetic (default: ONNX's)
///   requantize: fixed_point      # float | fixed_point (int multiplier + shift) | shift (power-of-two scales)
///   multiplier_bits: 32          # fixed_point: 2..32
///   rounding: half_away_from_zero  # half_even | half_away_from_zero | half_up
///   accumulator: {bits: 24, overflow: saturate}   # 8..32 bits; saturate | wrap
///   elementwise: {requantize: fixed_point, multiplier_bits: 16, left_shift: 20}
///   lut: [sigmoid, hardswish]    # ops run as int8 lookup tables (they must be quantized or fixed)
/// ```
/// Op names are qfx's canonical names (see `canonical_op_name` in op_names.h):
/// module classes and aten ops in snake_case (conv2d, batchnorm2d, relu, relu6,
/// add, mul, cat, flatten, reshape, max_pool2d, adaptive_avg_pool2d, mean, ...).
struct BackendConfig {
  std::string name;
  std::string description;
  std::string source;  ///< file it was loaded from ("" for built in C++)
  /// The runtime backend (qfx::runtime registry name) that calibrates and runs
  /// the converted model: "onednn", "reference", "cuda" or a plug-in's.
  std::string runtime = "onednn";
  /// Plug-in libraries the file's `runtime.plugins` named (absolute paths), loaded
  /// when the file was read.
  std::vector<std::string> runtime_plugins;
  TensorConstraints activation;
  TensorConstraints weight;
  QDType bias_dtype = QDType::kInt32;
  bool power_of_two_scale = false;
  double scale_min = 0.0;
  double scale_max = std::numeric_limits<double>::infinity();
  std::vector<std::vector<std::string>> fusions;
  std::map<std::string, OpConfig> ops;
  /// The target's integer arithmetic (`arithmetic:`; see runtime::Arithmetic): the
  /// exported model carries it as ONNX metadata, and every runtime backend computes
  /// the int8 model with it. Default: ONNX's (float requantization).
  runtime::Arithmetic arithmetic;
  /// `mac_cost: {w4a8: 0.5, w8a8: 1, w8a16: 2, float: 4}`: the relative cost of one
  /// multiply-accumulate at each precision (ptq.mixed_precision's candidate names),
  /// for `ptq.mixed_precision.budget.latency`. Names left out take the defaults
  /// of MixedPrecisionOptions::mac_cost.
  std::map<std::string, double> mac_cost;

  /// The entry for op `name` (kFloat if not listed).
  OpConfig op(const std::string& name) const;
  /// True if `pattern` (op names, first to last) is a listed fusion.
  bool has_fusion(const std::vector<std::string>& pattern) const;

  /// Loads and validates a backend YAML file. Throws IoError if unreadable and
  /// ConfigError "file:line:column: ..." for a syntax error, an unknown key, a
  /// wrong type, a bad value or an unknown op name.
  static BackendConfig load(const std::string& path);
  /// Resolves a backend by name ("onednn", "reference", "example_accel": looked
  /// up in `search_dirs`, then in `backends/` of each of config_dirs())
  /// or loads it from a path (anything containing '/' or ending in .yaml).
  /// Throws ConfigError naming the backends available if none matches.
  static BackendConfig resolve(const std::string& name_or_path, const std::vector<std::string>& search_dirs = {});
};

/// The folders holding qfx's shipped configs (`backends/`, `ptq/`, `qat/`), in the
/// order they are searched: $QFX_CONFIG_DIR if set; the installed
/// `<prefix>/share/qfx/configs`, found next to the loaded runtime library (so an
/// installed or moved prefix works without the source tree); the source tree's
/// `configs/` when qfx runs from its build tree (named in `qfx_build_tree.paths`
/// beside the build tree's runtime library; never installed).
std::vector<std::string> config_dirs();
/// Where `${QFX_FIXTURES}` points when the variable is unset: the build tree's
/// exported fixtures, or an installed `<prefix>/share/qfx/fixtures` (the default
/// job's model); empty when neither exists.
std::string default_fixture_dir();
/// The value of `key` ("configs", "fixtures") in the build tree's
/// `qfx_build_tree.paths`; empty outside a build tree.
std::string build_tree_path(const std::string& key);
/// The first existing `DIR/relative` over config_dirs() (e.g. "ptq/default.yaml").
/// Throws ConfigError naming `relative` and the folders tried.
std::string find_config(const std::string& relative);

/// The op names a backend YAML may use (for validation and documentation).
const std::vector<std::string>& known_op_names();

}  // namespace qfx::quant
