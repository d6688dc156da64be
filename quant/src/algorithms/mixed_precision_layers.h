// Internal: the layers ptq.mixed_precision searches, their costs per candidate,
// and putting one layer at one candidate (and back) on a calibrated model.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "layers.h"
#include "qfx/quant/mixed_precision.h"

namespace qfx::quant::detail {

/// One weight of a searched layer: the live tensor the graph reads, its
/// FakeQuantize and its float value.
struct SearchedWeight {
  at::Tensor live;
  FakeQuantize* fq = nullptr;
  at::Tensor float_value;
  int64_t out_axis = 0;
  fx::Node* node = nullptr;  ///< the node that reads it
  int64_t uses = 0;          ///< uses of each weight per sample (output elements / output channels), set by count_macs
};

/// A searched layer as the search sees it.
struct SearchedLayer {
  MixedPrecisionLayer info;
  QConfigPtr base;                       ///< the qconfig it resolved to
  std::vector<SearchedWeight> weights;
  std::shared_ptr<FakeQuantize> output;  ///< its output activation's FakeQuantize (null: none, or functional)
  bool functional = false;               ///< functional linears of one module
  bool float_activations = false;        ///< its activations are float (weight-only)
  std::vector<int> candidates;           ///< indices into the parsed candidates it can take, most precise first
  std::vector<double> noise;             ///< per candidate index: output noise power added (relative)
  std::vector<double> latency;           ///< per candidate index: MACs x cost
};

/// The layers of `gm` with a quantized weight, grouped by qconfig unit, in graph
/// order; layers that cannot be searched are noted in `notes`.
std::vector<SearchedLayer> searched_layers(fx::GraphModule& gm, const QConfigMapping& mapping,
                                           std::vector<std::string>& notes);

/// Counts each weight's uses per sample (SearchedWeight::uses) by running `gm` on
/// `sample` (one forward for the modules, one per functional linear), and sums the
/// layers' MACs (per sample of the model's first input's dimension 0).
void count_macs(fx::GraphModule& gm, std::vector<SearchedLayer>& layers, const std::vector<at::Tensor>& sample);

/// Fills `l.candidates`, `l.info.bytes` and `l.latency` for the parsed candidates
/// `cands` (most precise first per layer), noting those the layer cannot take.
void cost_candidates(SearchedLayer& l, const std::vector<PrecisionCandidate>& cands, const BackendConfig& backend,
                     const MixedPrecisionOptions& o, std::vector<std::string>& notes);

/// Puts one layer at one candidate; `reset` puts it back as it was found.
class LayerPrecision {
 public:
  LayerPrecision(SearchedLayer& l, const BackendConfig& backend, const MixedPrecisionOptions& o);
  ~LayerPrecision() { reset(); }
  LayerPrecision(const LayerPrecision&) = delete;
  LayerPrecision& operator=(const LayerPrecision&) = delete;
  void set(const PrecisionCandidate& c);
  void reset();

 private:
  SearchedLayer& l_;
  const BackendConfig& backend_;
  const MixedPrecisionOptions& o_;
  std::unique_ptr<Int16Output> wide_;
  bool changed_ = false;
};

/// The observer spec of a layer's weight at candidate `c` (ConfigError naming
/// `node` if the target cannot take it).
ObserverSpec candidate_weight_spec(const SearchedLayer& l, const PrecisionCandidate& c, const BackendConfig& backend,
                                   const MixedPrecisionOptions& o);

}  // namespace qfx::quant::detail
