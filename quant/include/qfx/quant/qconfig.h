// QConfig and QConfigMapping (torch.ao.quantization.QConfigMapping): which
// observer / fake quantize each tensor gets, chosen per module.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qfx/quant/backend_config.h"
#include "qfx/quant/observer.h"

namespace qfx::quant {

/// Requested quantization of one tensor kind (activation or weight). Unset fields
/// take the backend's defaults (its first dtype/qscheme/granularity, its scale
/// constraints) and the pass's defaults (histogram + mse for PTQ activations,
/// moving-average min/max for QAT, min/max for weights).
struct TensorQConfig {
  std::optional<ObserverKind> observer;     ///< per-tensor kind; per_channel picks the per-channel form
  std::optional<Algorithm> algorithm;       ///< histogram observers only
  std::optional<QDType> dtype;
  std::optional<QScheme> qscheme;
  std::optional<bool> per_channel;
  /// Weights: > 0 asks for block-wise qparams (`granularity: per_block`): one scale
  /// per block of this many input channels of a 2-D linear weight (QuantSpec::block_size).
  std::optional<int64_t> block_size;
  /// Activations: `dtype: float` keeps the op's inputs and output float while its
  /// weights are quantized (weight-only quantization, "W4A16" / "W8A16").
  bool keep_float = false;
  std::optional<int> bits;                  ///< 2..8 (quant range inside the 8-bit container)
  std::optional<bool> narrow_range;         ///< drop the most negative value (s8: -127..127)
  std::optional<double> percentile;
  std::optional<double> averaging_constant;
  std::optional<int64_t> bins;
  bool learnable = false;                   ///< LSQ scale in QAT
};

/// The qconfig of one module: how its activations and its weights are quantized.
struct QConfig {
  TensorQConfig activation;
  TensorQConfig weight;
};
/// A qconfig, or nullptr: keep the module float.
using QConfigPtr = std::shared_ptr<const QConfig>;

/// Turns a request into a concrete observer spec on `backend`. `is_weight`
/// selects the constraints; `qat` changes the default observer (moving average).
/// Throws ConfigError naming `node` and the constraint the backend cannot honour
/// (dtype, scheme, per-channel, bit width, an algorithm without histograms).
ObserverSpec resolve_tensor_qconfig(const TensorQConfig& req, const BackendConfig& backend, bool is_weight,
                                    bool qat, const std::string& node);

/// Chooses a qconfig per module, most specific first: module name (exact, then
/// its parents: "layer1.0.conv1", "layer1.0", "layer1") > module name regex
/// (full match, in insertion order) > object type (the module class "Conv2d", or
/// the op name "add", "cat" for function nodes) > global. A nullptr entry keeps
/// matching modules float.
class QConfigMapping {
 public:
  QConfigMapping& set_global(QConfigPtr q);
  /// The global qconfig (all defaults unless set).
  const QConfigPtr& global() const { return global_; }
  QConfigMapping& set_object_type(const std::string& type, QConfigPtr q);
  /// Module paths that `regex` matches in full (RE2 syntax, as Python's `re` for
  /// the usual patterns; linear-time matching with bounded memory, so a pattern
  /// from a config file cannot make matching run away). Throws
  /// ArgumentError with RE2's reason for a pattern that does not compile.
  QConfigMapping& set_module_name_regex(const std::string& regex, QConfigPtr q);
  QConfigMapping& set_module_name(const std::string& name, QConfigPtr q);
  /// The qconfig for a node in module `module_path` of class / op `type`, and
  /// (in `matched_by`) which entry decided it ("module_name:layer1", "global").
  QConfigPtr resolve(const std::string& module_path, const std::string& type, std::string* matched_by = nullptr) const;
  /// The `module_name` and `module_name_regex` entries that match none of
  /// `module_paths` ("module_name 'layer9'", "module_name_regex 'head\\..*'"), in
  /// the order they were set. A module_name entry matches its module and the
  /// modules inside it.
  std::vector<std::string> unmatched(const std::vector<std::string>& module_paths) const;
  /// A mapping with one global qconfig of all defaults (see TensorQConfig).
  static QConfigMapping default_mapping();
  /// Loads the `qconfig:` section of a YAML config file:
  /// ```yaml
  /// qconfig:
  ///   global:
  ///     activation: {observer: histogram, algorithm: entropy, dtype: u8, qscheme: affine, bits: 8}
  ///     weight: {observer: minmax, granularity: per_channel, bits: 8}
  ///   module_type: {Linear: null}
  ///   module_name_regex: {"head\\..*": null}
  ///   module_name: {fc: {weight: {bits: 4}}}
  /// ```
  /// Missing section: `default_mapping()`. Throws IoError / ConfigError
  /// (file:line:column) for unknown keys, wrong types and bad values.
  static QConfigMapping load(const std::string& path);

 private:
  QConfigPtr global_ = std::make_shared<QConfig>();
  std::vector<std::pair<std::string, QConfigPtr>> object_type_;
  std::vector<std::pair<std::string, QConfigPtr>> regex_src_;
  struct CompiledRegex;  // an RE2 pattern (qconfig.cpp)
  std::vector<std::pair<std::shared_ptr<const CompiledRegex>, QConfigPtr>> regex_;
  std::vector<std::pair<std::string, QConfigPtr>> module_name_;
};

}  // namespace qfx::quant
