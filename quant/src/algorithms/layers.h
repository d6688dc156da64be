// Internal: what the PTQ algorithms share: the weighted layers of a prepared
// graph, calibration samples, capturing a layer's input, float reference weights.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/ptq_algorithms.h"

namespace qfx::quant::detail {

/// One weighted layer: a FusedConvLinear with a weight FakeQuantize.
struct WeightedLayer {
  std::string path;
  std::shared_ptr<FusedConvLinear> module;
  std::string node;  ///< the (first) graph node calling it
};

/// The weighted layers `gm`'s graph calls, in graph order.
std::vector<WeightedLayer> weighted_layers(fx::GraphModule& gm);

/// Up to `n` samples from `data`, in batches (one tensor per graph input each).
std::vector<std::vector<at::Tensor>> take_samples(const NextBatch& data, int64_t n);

/// Runs `gm` on every batch (no gradient) and hands `visit` what the module at
/// `path` receives as its first argument, call by call (detached). Throws
/// InternalError if the module never ran.
void for_each_input(fx::GraphModule& gm, const std::string& path, const std::vector<std::vector<at::Tensor>>& batches,
                    const std::function<void(const at::Tensor&)>& visit);

/// Runs `gm` on every batch (no gradient) and returns what the module at `path`
/// received as its first argument, concatenated over the batches.
at::Tensor capture_input(fx::GraphModule& gm, const std::string& path, const std::vector<std::vector<at::Tensor>>& batches);

/// Observes `f`'s weight with its FakeQuantize `fq` now when the FakeQuantize has
/// no statistics and no frozen qparams (a model calibrated on the runtime, whose
/// weights were not observed), so that `fq.qparams()` are the weight's.
void observe_weight_if_uncalibrated(FakeQuantize& fq, FusedConvLinear& f);

/// Layer `path`'s input over `batches` in the float model (every layer on its
/// `reference` weights) and in the fake-quantized model (current weights,
/// observers off), as {float, quantized}. Leaves `gm` in the fake-quant state
/// with observers disabled.
std::pair<at::Tensor, at::Tensor> capture_float_and_quantized_input(fx::GraphModule& gm, const std::string& path,
                                                                     const std::vector<std::vector<at::Tensor>>& batches,
                                                                     const FloatWeights& reference);

/// While alive, every layer in `reference` computes with its reference (float)
/// weight and bias; the current values come back on destruction.
class UseFloatWeights {
 public:
  UseFloatWeights(fx::GraphModule& gm, const FloatWeights& reference);
  ~UseFloatWeights();
  /// Leaves the reference values in place: nothing is restored on destruction.
  void keep() { saved_.clear(); }
  UseFloatWeights(const UseFloatWeights&) = delete;
  UseFloatWeights& operator=(const UseFloatWeights&) = delete;

 private:
  struct Saved {
    at::Tensor weight, bias;        // the live parameters
    at::Tensor weight_now, bias_now;  // their values before the swap
  };
  std::vector<Saved> saved_;
};

/// A functional linear: aten::linear(x, FakeQuantize(get_attr W), ...), as prepare_fx
/// quantizes F.linear on a parameter (nn.MultiheadAttention's projections).
struct FunctionalLinear {
  fx::Node* node = nullptr;         ///< the aten::linear call
  fx::Node* weight_attr = nullptr;  ///< the get_attr of W ([out, in])
  FakeQuantize* fq = nullptr;       ///< W's FakeQuantize
  bool shared = false;              ///< W or its FakeQuantize is read by another node too
};

/// `n` as a functional linear; nullopt when it is not one.
std::optional<FunctionalLinear> functional_linear(fx::GraphModule& gm, fx::Node* n);

/// Points get_attr `attr` at a copy of `value` under a new attribute (its name with
/// `suffix`): the user's tensor stays.
void set_attr_copy(fx::GraphModule& gm, fx::Node* attr, const at::Tensor& value, const std::string& suffix);

/// Like `for_each_input`, for any node: what `reader` receives as its first argument,
/// through a temporary identity module inserted before it (removed afterwards).
void for_each_input_of(fx::GraphModule& gm, fx::Node* reader, const std::vector<std::vector<at::Tensor>>& batches,
                       const std::function<void(const at::Tensor&)>& visit);

/// `v` ([C]) shaped to broadcast along `axis` of a rank-`rank` tensor.
at::Tensor along(const at::Tensor& v, int64_t rank, int64_t axis);

/// Channel axis of a layer's output (1 for conv, last for linear).
int64_t output_axis(const FusedConvLinear& f, const at::Tensor& y);

/// `gm`'s output over `samples`, concatenated along dim 0. Throws
/// std::invalid_argument naming `who` if the output is not one tensor.
at::Tensor run_all(fx::GraphModule& gm, const std::vector<std::vector<at::Tensor>>& samples, const char* who);

/// `gm`'s outputs over `samples`, every output tensor flattened and concatenated
/// (tuples, lists and dict values in order), then concatenated over the batches:
/// what an output SQNR compares. Throws ArgumentError naming `who` if an output
/// is not a tensor or a container of tensors.
at::Tensor run_all_flat(fx::GraphModule& gm, const std::vector<std::vector<at::Tensor>>& samples, const char* who);

/// The FakeQuantize observing node `node`'s output (prepare_fx's observer call
/// after it), or null.
std::shared_ptr<FakeQuantize> output_fake_quant(fx::GraphModule& gm, const std::string& node);

/// A layer's output activation moved to int16: the observer keeps its
/// statistics, the qparams are recomputed for the s16 range [-32768, 32767];
/// undo() restores the 8-bit ones (not called on destruction).
class Int16Output {
 public:
  explicit Int16Output(std::shared_ptr<FakeQuantize> fq);
  void undo();

 private:
  std::shared_ptr<FakeQuantize> fq_;
  QuantSpec old_;
};

/// 10 log10(|ref|^2 / |ref - x|^2).
double sqnr_db(const at::Tensor& ref, const at::Tensor& x);

}  // namespace qfx::quant::detail
