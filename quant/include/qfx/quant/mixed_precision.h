// Mixed precision under a budget: one weight / activation precision per layer,
// chosen from the layers' measured sensitivities and the target's costs (as
// AIMET's AMP and NVIDIA ModelOpt's auto_quantize choose them).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/calibrate.h"
#include "qfx/quant/qconfig.h"

namespace qfx::quant {

/// One precision a layer may take: "w<b>" (weights of b = 2..8 bits, the layer's
/// activations as configured), "w<b>a8" (the same, on a layer whose activations
/// are 8-bit integers), "w<b>a16" (weights of b bits, the layer's output
/// activation in s16: a 16x8 layer) or "float" (the layer's qconfig null: float
/// weights, as `auto_fallback` moves a layer). Weights below 8 bits are block-wise
/// (`block_size` input channels per scale) on linear layers, per channel on
/// convolutions; 8-bit weights are per channel.
struct PrecisionCandidate {
  std::string name;         ///< as written: "w4a8", "w8", "float"
  int weight_bits = 0;      ///< 2..8; 0 for "float"
  int activation_bits = 0;  ///< 8 or 16 when the name says; 0: as configured
  bool is_float() const { return weight_bits == 0; }
  /// Parses a name above. Throws ConfigError naming `what` (the config key) for
  /// anything else ("w9", "w4a4", "int8").
  static PrecisionCandidate parse(const std::string& name, const std::string& what);
};

/// Options of `mixed_precision` (the `ptq.mixed_precision` section of a PTQ config).
struct MixedPrecisionOptions {
  /// The precisions a layer may take (PrecisionCandidate names), at least two.
  std::vector<std::string> candidates{"w4a8", "w8a8", "float"};
  /// Input channels per weight scale of the candidates below 8 bits (0: per channel).
  int64_t block_size = 128;
  /// The largest weight size (bytes: codes, scales and zero points of every
  /// searched layer; float weights 4 bytes each); 0: no byte budget.
  int64_t weight_bytes = 0;
  /// The same budget as the mean bits per weight over the searched layers
  /// (ModelOpt's "effective bits": 4.8 is all-W8's size minus 40 %); 0: none.
  double effective_bits = 0;
  /// The largest estimated latency, relative to every searched layer in w8a8:
  /// sum over layers of MACs x the target's `mac_cost` of the layer's precision.
  /// 0: no latency budget.
  double latency = 0;
  int64_t num_samples = 64;  ///< calibration samples the sensitivities are measured on
  /// Relative cost of one multiply-accumulate per candidate name (the target's
  /// `mac_cost`); absent names: 1 for 8-bit integer activations, 2 for 16-bit, 4
  /// for float activations and float layers.
  std::map<std::string, double> mac_cost;
  /// Called as the search goes: ("sensitivities", layers done, layers).
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

/// One searched layer (a qconfig unit: a Linear / Conv module, or the module
/// whose functional linears share one `qconfig.module_name` entry).
struct MixedPrecisionLayer {
  std::string layer;       ///< module path (the `qconfig.module_name` key)
  std::string node;        ///< first graph node of it
  std::string object_type; ///< what `QConfigMapping::resolve` matched it as ("Linear", "linear")
  std::string matched_by;  ///< the qconfig entry it resolved through ("module_type:Linear", "global")
  bool linear = true;      ///< every weight 2-D (block-wise candidates apply); false: a convolution
  int64_t weights = 0;     ///< weight elements
  int64_t macs = 0;        ///< multiply-accumulates per sample, counted on the first calibration batch
  std::string chosen;      ///< candidate name
  /// Output SQNR (dB) against the float model with only this layer at each
  /// candidate (every other searched layer at the most precise one).
  std::map<std::string, double> sqnr_db;
  std::map<std::string, int64_t> bytes;  ///< weight bytes per candidate
};

/// One point of the estimated size / error front the search walks.
struct MixedPrecisionPoint {
  int64_t weight_bytes = 0;        ///< of the searched layers (as MixedPrecisionOptions::weight_bytes counts)
  double latency = 0;              ///< relative to all-w8a8
  double estimated_sqnr_db = 0;    ///< from the per-layer sensitivities, noise powers added
};

/// What `mixed_precision` chose.
struct MixedPrecisionResult {
  std::vector<MixedPrecisionLayer> layers;  ///< graph order
  std::vector<MixedPrecisionPoint> front;   ///< most precise first, the chosen point included
  int64_t weight_bytes = 0, weight_bytes_budget = 0;  ///< chosen; budget (0: none)
  double latency = 0, latency_budget = 0;             ///< chosen; budget (0: none)
  double effective_bits = 0;                          ///< chosen weight bytes x 8 / weight elements
  double estimated_sqnr_db = 0;                       ///< of the chosen assignment
  double measured_sqnr_db = 0;                        ///< of the chosen assignment, every layer at once
  /// Output SQNR (dB) and weight bytes with every searched layer at one candidate
  /// (a layer that cannot take it at its most precise), by candidate name.
  std::map<std::string, std::pair<double, int64_t>> uniform;
  bool reached = false;            ///< within every budget; false: where the walk ended (no move lowers what is exceeded)
  std::vector<std::string> notes;  ///< candidates a layer cannot take, and why
};

/// Mixed precision under a budget on a calibrated model (fake-quant state):
/// every layer with a quantized weight (qconfig not null; resolved through
/// `mapping` on `backend`) is a searched layer. (1) Sensitivity: with every other
/// layer at the most precise candidate, each layer is put at each candidate in
/// turn (weights fake-quantized from their float values with the candidate's
/// qparams, minmax; "a16" requantizes the output activation to s16 from its
/// observed statistics; "float" turns the weight's fake quantization off) and
/// the output SQNR against the float model is measured on `num_samples` samples
/// of `data`. (2) Search: the layers' output noise powers are taken as additive;
/// starting from every layer at its most precise candidate, a greedy walk moves
/// one layer at a time one step cheaper, the move with the smallest estimated
/// noise added per byte (or per unit of latency) saved, until every budget is
/// met (the walked points are the front); then layers are moved back up while
/// the budgets allow, the largest noise reduction per byte first. (3) The chosen
/// assignment is measured with every layer at once. The model is left as it
/// was (every change undone). Throws ConfigError for an unknown candidate name
/// or a candidate the target cannot take, ArgumentError for no budget, no
/// calibration samples, no searched layer, or a multi-output model whose outputs
/// are not tensors.
MixedPrecisionResult mixed_precision(fx::GraphModule& gm, const QConfigMapping& mapping, const BackendConfig& backend,
                                     const NextBatch& data, const MixedPrecisionOptions& options);

/// `mapping` with each searched layer's `qconfig.module_name` entry at its chosen
/// candidate: the qconfig the layer resolved to with the weight's bits and
/// granularity (and the output's dtype for "a16") changed, or null for "float";
/// the mapping `quant::ptq` prepares the deployed model with.
QConfigMapping with_mixed_precision(const QConfigMapping& mapping, const MixedPrecisionResult& r,
                                    const MixedPrecisionOptions& options);

/// The qconfig of a layer at candidate `c`: `base` with the weight's bits and
/// granularity changed (block-wise by `block_size` below 8 bits where `linear`,
/// else per channel) and, for "a16", the activation's dtype s16; null for "float".
QConfigPtr candidate_qconfig(const QConfig& base, const PrecisionCandidate& c, int64_t block_size, bool linear);

}  // namespace qfx::quant
