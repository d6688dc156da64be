// Post-training algorithms that lower the error of low-bit weights without
// training: cross-layer equalisation, AdaRound, GPTQ and empirical bias correction,
// each a pass over a prepared GraphModule (PTQ: batch norm folded).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "qfx/fx/graph_module.h"
#include "qfx/quant/algorithms.h"
#include "qfx/quant/calibrate.h"
#include "qfx/quant/qparams.h"

namespace qfx::quant {

/// One equalised pair of consecutive layers.
struct EqualizedPair {
  std::string first, second;  ///< module paths (FusedConvLinear)
  /// max/min over channels of the per-channel weight ranges (max |w|) of
  /// `first` (output channels) and `second` (input channels), before and after.
  double spread_first_before = 0, spread_second_before = 0;
  double spread_first_after = 0, spread_second_after = 0;
};

/// Cross-layer equalisation (Nagel et al. 2019, "Data-Free Quantization Through
/// Weight Equalization and Bias Correction", section 4.1) on a prepared model
/// whose observers have not seen data yet (run it between prepare_fx and
/// calibration).
///
/// Pairs: a Conv (any groups) or Linear FusedConvLinear with no activation or a
/// fused ReLU (ReLU6 clips, so it is not scale-equivariant and ends a pair),
/// whose output feeds only the next Conv (groups allowed, depthwise included)
/// or Linear, directly or through one activation FakeQuantize. For output
/// channel i of the first, with r1_i the range of its weights and r2_i the range
/// of the second's weights reading channel i: s_i = sqrt(r1_i r2_i) / r2_i; the
/// first's weights and bias are divided by s_i, the second's weights multiplied,
/// so the float function is unchanged (ReLU(x / s) = ReLU(x) / s for s > 0) and
/// both ranges become sqrt(r1_i r2_i). `iterations` sweeps over all pairs
/// (chains converge over sweeps). Returns the pairs (last sweep's spreads).
/// Throws ArgumentError if an activation observer between a pair already
/// saw data (its statistics would no longer fit the equalised model).
std::vector<EqualizedPair> cross_layer_equalization(fx::GraphModule& gm, int iterations = 4);

/// One LayerNorm whose output SmoothQuant rescaled, and the linears it feeds.
struct SmoothedNorm {
  std::string norm;                  ///< node name of the LayerNorm (module or aten::layer_norm)
  std::vector<std::string> linears;  ///< module paths of the Linear layers reading it
  /// max/min over channels of the per-channel max |activation| of the norm's
  /// output (the linears' input) on the calibration data, before and after.
  double spread_before = 0, spread_after = 0;
};

/// SmoothQuant (Xiao et al. 2023, "SmoothQuant: Accurate and Efficient
/// Post-Training Quantization for Large Language Models"): for every LayerNorm
/// (a torch.nn.LayerNorm module, or aten::layer_norm with weight and bias) whose
/// output feeds only Linear layers (directly or through one activation
/// FakeQuantize), per input channel j: s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)
/// (X over `num_samples` calibration samples, W over all the linears), then the
/// norm's weight and bias are divided by s and every linear's weight columns
/// multiplied by it: the float function is unchanged and outlier channels of the
/// activation move into the weights. Run between prepare_fx and calibration; the
/// user's model keeps its parameters (the norm and linears get copies). alpha in
/// (0, 1). Leaves the model in the calibration state. Throws ArgumentError if
/// an observer between already saw data, ArgumentError for a bad alpha.
std::vector<SmoothedNorm> smooth_quant(fx::GraphModule& gm, const NextBatch& data, double alpha = 0.5,
                                       int64_t num_samples = 256);

/// Options of `awq` (the `ptq.awq` section of a PTQ config).
struct AwqOptions {
  int64_t grid = 20;          ///< ratios searched: 0, 1/grid, ..., (grid-1)/grid (the paper's 20)
  int64_t num_samples = 128;  ///< calibration samples (every row of a layer's input is a token)
  /// The weight-clipping search after the scales: per output row and weight block
  /// (per row for per-channel weights; not done for per-tensor ones), the largest
  /// |w| is shrunk by 1 - i/grid, i = 0 .. grid·max_shrink, to the value whose
  /// nearest rounding gives the least output error on at most `clip_tokens` input
  /// rows, and the weight is clamped to it.
  bool clip = true;
  double max_shrink = 0.5;      ///< the most the clipping search shrinks a block's range (0 .. 1)
  int64_t clip_tokens = 512;    ///< input rows the clipping search uses (evenly spaced)
  /// Called after each group: (input node, groups done, groups total).
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

/// The Linear layers reading one value, and the scale AWQ gave them.
struct AwqGroup {
  std::string input;                 ///< the node whose value the linears read
  std::vector<std::string> linears;  ///< module paths (functional linears: node names)
  double ratio = 0;                  ///< the chosen exponent r of s = mean|x|^r (0: no scaling)
  /// sum over the linears of the mean squared output error of the weights' nearest
  /// rounding on the captured inputs, without scaling (r = 0) and at the chosen r.
  double error_nearest = 0, error_awq = 0;
  /// The same error after the clipping search (equal to error_awq without it).
  double error_clip = 0;
  /// How 1/s reaches the input: "layer_norm" (folded into the norm's weight and bias)
  /// or "mul" (an aten::mul by a constant before the linears; float activations only).
  std::string applied;
};

/// What `awq` did: the scaled groups, and the linears it left, with the reason.
struct AwqResult {
  std::vector<AwqGroup> groups;
  std::vector<std::pair<std::string, std::string>> skipped;  ///< (module path, reason)
};

/// AWQ's activation-aware scale search and weight clipping (Lin et al. 2024, "AWQ:
/// Activation-aware Weight Quantization for LLM Compression and Acceleration",
/// section 3.2, as the authors' code searches both). Linear layers with a quantized weight
/// (FusedConvLinear modules, and functional aten::linear calls whose weight is a
/// get_attr no other node reads, e.g. MultiheadAttention's projections) reading the
/// same value x form a group; over `num_samples`
/// calibration samples of x ([tokens, K], the float model), per input channel
/// s = mean|x|^r, normalised by sqrt(max s * min s), for r on the grid; each
/// linear's weight W is rounded to nearest as Q(W diag(s)) diag(s)^-1 on its own
/// weight grid (its FakeQuantize's spec: per tensor, per channel or per block,
/// min/max qparams), and the r with the least output error sum_l |x W_l'^T - x W_l^T|^2
/// is kept (r = 0, no scaling, is on the grid, so the error never grows). The float
/// function is unchanged: W diag(s) with 1/s folded into a LayerNorm read only by
/// the group, else, where the linears' inputs are not quantized (weight-only
/// configs), an aten::mul by 1/s inserted before them; otherwise the group is
/// skipped (reported). Then, with `clip`, each linear's (scaled) weight is clamped
/// per output row and block to the range that minimises the block's output error
/// on x diag(s)^-1 (AwqOptions::clip): the weight observers calibrate the clamped
/// weights. Run between prepare_fx and calibration; the user's model
/// keeps its parameters. Leaves the model in the calibration state. Throws
/// ArgumentError for grid < 1 or no data.
AwqResult awq(fx::GraphModule& gm, const NextBatch& data, const AwqOptions& options = {});

/// The float weights and biases of every weighted layer (FusedConvLinear with a
/// weight FakeQuantize), by module path: clones taken by `snapshot_float_weights`.
/// AdaRound and bias correction change weights and biases; their targets are the
/// float model's outputs with these values. Pass one snapshot, taken before the
/// first of them, to both (each takes its own when given none). A layer without
/// bias has a zero bias here.
struct FloatWeights {
  std::map<std::string, std::pair<at::Tensor, at::Tensor>> layers;
};
/// Clones of the current weights and biases of `gm`'s weighted layers.
FloatWeights snapshot_float_weights(fx::GraphModule& gm);

/// Effect of an algorithm on one layer, measured on its calibration data.
struct LayerAlgorithmReport {
  std::string layer;          ///< module path
  double sqnr_before_db = 0;  ///< layer output SQNR (dB) against the float model, before
  double sqnr_after_db = 0;   ///< and after the algorithm
  std::string kept;           ///< AdaRound: "adaround", or "nearest" when it did not help
  double seconds = 0;
};

/// Options of `adaround`.
struct AdaRoundOptions {
  int64_t iterations = 1000;   ///< optimisation steps per layer
  double reg = 0.01;           ///< lambda of the rounding regulariser
  double beta_start = 20.0;    ///< annealed beta of the regulariser, start...
  double beta_end = 2.0;       ///< ...and end (linear, after the warm-up)
  double warmup = 0.2;         ///< fraction of iterations without the regulariser
  int64_t batch_size = 32;     ///< samples per step
  int64_t num_samples = 256;   ///< calibration samples used (captured once per layer)
  /// Adam learning rate of the rounding variables. The paper's 1e-3 goes with
  /// 10,000 iterations; 1e-2 with the default 1,000 reaches the same accuracy on
  /// the Fashion-MNIST fixtures (docs/pipelines.md, "4-bit weights") in a tenth of the time.
  double lr = 1e-2;
  uint64_t seed = 0;           ///< batch sampling
  /// Called after each layer: (layer path, layers done, layers total).
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

/// AdaRound (Nagel et al. 2020, "Up or Down? Adaptive Rounding for Post-Training
/// Quantization"): for each weighted layer in graph order, learns whether each
/// weight rounds up or down (instead of to nearest) by minimising
/// || act(W~ x~) - act(W x) ||^2 + reg * sum(1 - |2h(V) - 1|^beta), where x~ is
/// the layer's input in the fake-quantized model (earlier layers already
/// rounded), x its input in the float model, W~ = s * (clamp(floor(W/s) + h(V)
/// + zp, qmin, qmax) - zp) and h the rectified sigmoid (zeta 1.1, gamma -0.1),
/// with Adam on V (libtorch autograd). Works with any qparams the weight
/// FakeQuantize holds (per-tensor or per-channel, power-of-two scales, 2..8 bits).
/// The chosen codes are written back as the weight (their dequantized values) and
/// the weight FakeQuantize's qparams are frozen (`freeze_qparams`), so convert_fx
/// exports exactly those codes. A layer whose reconstruction error does not
/// improve keeps nearest rounding. Run after calibration; leaves the model in
/// the fake-quant state with observers disabled. `data` gives calibration batches.
/// Layers with a learnable scale or a simulated batch norm are skipped.
std::vector<LayerAlgorithmReport> adaround(fx::GraphModule& gm, const NextBatch& data, const AdaRoundOptions& options = {},
                                           const FloatWeights* reference = nullptr);

/// Options of `gptq` (the `ptq.gptq` section of a PTQ config).
struct GptqOptions {
  /// Dampening: damp * mean(diag H) is added to H's diagonal before the inverse
  /// (the paper's lambda as a share of the mean diagonal; 0.01 as in the paper).
  double damp = 0.01;
  /// Columns per lazy batch (the paper's B = 128): the error is propagated within
  /// the batch column by column, then to the remaining columns in one product.
  /// Exact arithmetic gives the same result for every value; it changes speed only.
  int64_t lazy_batch = 128;
  /// Columns in descending order of diag(H) (the reference code's `act_order`).
  /// With block-wise weights the groups are then static: each block's qparams are
  /// the weight FakeQuantize's, computed from the original weights, so blocks stay
  /// runs of consecutive input channels in the original order.
  bool act_order = false;
  int64_t num_samples = 128;  ///< calibration samples (the Hessian's tokens: every row of the layer's input)
  /// Called after each layer: (layer path, layers done, layers total).
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

/// The Hessian of GPTQ's layer-wise objective, H = 2/n * sum over the n input rows
/// x ([K]) of x x^T, accumulated in float64 batch by batch (memory K x K whatever
/// the number of rows).
class GptqHessian {
 public:
  /// For inputs of `k` features. Throws ArgumentError for k < 1.
  explicit GptqHessian(int64_t k);
  /// Adds the rows of `x` ([..., K], any float dtype; each row one token).
  /// Throws DataError if the last dimension is not K.
  void add(const at::Tensor& x);
  /// H = 2/n * sum x x^T, float64 [K, K] (zeros before any row).
  at::Tensor hessian() const;
  int64_t rows() const { return rows_; }

 private:
  at::Tensor sum_;  // sum x x^T, float64 [K, K]
  int64_t rows_ = 0;
};

/// GPTQ's result on one weight matrix.
struct GptqWeights {
  at::Tensor weight;  ///< [C, K] float64: the dequantized codes, (codes - zero_point) * scale
  at::Tensor codes;   ///< [C, K] int64 codes in [quant_min, quant_max]
  QParams qparams;    ///< the codes' qparams (float32 scale, int32 zero_point; the layout of `observed`)
};

/// GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for
/// Generative Pre-trained Transformers", Algorithm 1) on one [C, K] weight with the
/// Hessian `hessian` ([K, K], GptqHessian) of its layer's inputs, in float64.
/// Dead inputs (H_ii = 0) get W[:, i] = 0 and H_ii = 1; damp * mean(diag H) is added
/// to the diagonal; the columns (descending diag(H) with act_order) are quantized
/// in order, each one's error (w - q) / U_jj spread over the later columns through
/// the upper Cholesky factor U of H^-1, in lazy batches. Codes are
/// clamp(round_half_even(w / scale) + zp, quant_min, quant_max).
/// qparams: per-tensor or per-channel ones are `observed` (computed from the
/// original weight); block-wise ones (spec.block_size > 0) are computed with
/// `compute_qparams(spec)` from the min/max of the current, error-updated weights
/// of each block when the sweep reaches its first column (the paper's groups),
/// or with act_order are `observed` (static groups). Throws ArgumentError for bad
/// shapes or options, DataError when H + damping is not positive definite.
GptqWeights gptq_quantize(const at::Tensor& weight, const at::Tensor& hessian, const QuantSpec& spec,
                          const QParams& observed, const GptqOptions& options = {});

/// GPTQ's layer-output proxy of a quantized weight's error, relative:
/// tr((W - Q) H (W - Q)^T) / tr(W H W^T), W, Q [C, K], H [K, K] (float64).
double gptq_relative_error(const at::Tensor& weight, const at::Tensor& quantized, const at::Tensor& hessian);

/// What `gptq` did to one layer.
struct GptqLayerReport {
  std::string layer;          ///< module path
  /// gptq_relative_error on the layer's calibration Hessian, with round to nearest
  /// on the weight FakeQuantize's qparams (what qfx deploys without GPTQ) and with GPTQ.
  double error_nearest = 0;
  double error_gptq = 0;
  int64_t rows = 0;           ///< input rows (tokens) the Hessian summed
  int64_t dead_inputs = 0;    ///< input channels that were 0 on every row
  double seconds = 0;
};

/// What `gptq` did to a model.
struct GptqResult {
  std::vector<GptqLayerReport> layers;  ///< in graph order
  /// Weighted layers left as they were, with the reason ("conv: GPTQ runs on Linear layers").
  std::vector<std::pair<std::string, std::string>> skipped;
};

/// GPTQ on every Linear layer (FusedConvLinear op kLinear with a weight
/// FakeQuantize, and functional aten::linear calls whose weight FakeQuantize reads
/// a get_attr, e.g. nn.MultiheadAttention's projections; reported by node name) of
/// a calibrated model, one after the other in graph order: each
/// layer's Hessian is summed over `num_samples` calibration samples of `data` from
/// its inputs in the fake-quantized model with the earlier layers already GPTQ'd
/// (the paper's sequential mode), then `gptq_quantize` runs on its weight. The
/// dequantized codes become the layer's weight (a copy: the user's model keeps its
/// float weight) and the weight FakeQuantize's qparams are set to GPTQ's and frozen,
/// so convert_fx exports exactly GPTQ's codes. Conv layers, learnable (LSQ) scales,
/// simulated batch norm and weights another node also reads are skipped (listed
/// with the reason). Leaves the model
/// in the fake-quant state with observers disabled. Throws ArgumentError for bad
/// options or no data.
GptqResult gptq(fx::GraphModule& gm, const NextBatch& data, const GptqOptions& options = {});

/// Empirical bias correction (Nagel et al. 2019, section 4.2, with the expected
/// outputs measured on calibration data rather than derived from batch norm):
/// for each weighted layer in graph order, the mean over the calibration
/// samples of (quantized model's pre-activation output - float model's) per
/// output channel is subtracted from the bias (a bias is added if the layer had
/// none). Inputs of the quantized model include earlier corrections. Run after
/// calibration (and after AdaRound); leaves the model in the fake-quant state
/// with observers disabled. `num_samples` caps the samples used.
std::vector<LayerAlgorithmReport> bias_correction(fx::GraphModule& gm, const NextBatch& data, int64_t num_samples = 256,
                                                  const FloatWeights* reference = nullptr);

/// How much one weighted layer's quantization costs (section "Sensitivity" of
/// docs/pipelines.md): output SQNR (dB) against the float model.
struct LayerSensitivity {
  std::string layer;           ///< module path
  double only_this_db = 0;     ///< only this layer quantized (its weight and its input activation)
  double all_but_this_db = 0;  ///< every quantized tensor but this layer's
};

/// Per-layer sensitivity of a calibrated model (fake-quant state, observers
/// off) on `num_samples` samples of `data`, by switching fake quantization of
/// single FakeQuantizes off and on (weights and activations keep their qparams).
/// Also returns, in `all_db` (optional), the SQNR with everything quantized.
/// Sorted most sensitive first (lowest `only_this_db`). Leaves the model in the
/// fake-quant state with observers disabled.
std::vector<LayerSensitivity> layer_sensitivity(fx::GraphModule& gm, const NextBatch& data, int64_t num_samples = 256,
                                                double* all_db = nullptr);

/// Options of `auto_fallback` (the `ptq.auto_fallback` section of a PTQ config).
struct AutoFallbackOptions {
  /// "top1": top-1 accuracy (percent) of the model's output against the held-out
  /// labels; "sqnr": output SQNR (dB) against the float model's output.
  std::string metric = "top1";
  double tolerance = 0.3;     ///< top1: the largest accepted drop from fp32, in points (percent)
  double min_sqnr_db = 30.0;  ///< sqnr: the smallest accepted output SQNR, in dB
  /// Where a layer may move; the first available one is used: "int16" (the
  /// layer's output activation in s16, read by 16x8 kernels; available when
  /// `int16_available`) and "float".
  std::vector<std::string> candidates{"int16", "float"};
  /// The target lists s16 among its activation dtypes (BackendConfig::activation).
  bool int16_available = false;
  int64_t max_layers = 5;         ///< most layers moved
  int64_t ranking_samples = 256;  ///< calibration samples for the ranking
  /// Called after each decision: ("decisions", done, max_layers).
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

/// Held-out samples for `auto_fallback`'s metric: batches (one tensor per graph
/// input each) and, for "top1", int64 labels [total samples].
struct HeldOutData {
  std::vector<std::vector<at::Tensor>> batches;
  at::Tensor labels;
};

/// One decision of `auto_fallback`.
struct FallbackStep {
  std::string layer;       ///< module path (a FusedConvLinear; the original module's name)
  std::string moved_to;    ///< "int16" or "float"
  double ranking_db = 0;   ///< output SQNR (dB) on the ranking samples after this move
  double metric = 0;       ///< held-out metric after this and every earlier move
};

/// What `auto_fallback` decided.
struct AutoFallbackResult {
  std::string metric;         ///< "top1" or "sqnr"
  double fp32 = 0;            ///< top1: fp32 accuracy (percent); sqnr: +inf
  double quantized = 0;       ///< the metric with every layer quantized
  double target = 0;          ///< top1: fp32 - tolerance; sqnr: min_sqnr_db
  bool reached = false;       ///< the last metric (or `quantized`) meets the target
  int64_t held_out_samples = 0;
  std::vector<FallbackStep> steps;  ///< in order
  std::vector<std::string> notes;   ///< candidates that were unavailable, and why
};

/// Automatic mixed precision by fallback (the layer-wise search of AIMET's
/// "AutoQuant" and of TensorRT/Horizon's sensitivity-driven fallback): on a
/// calibrated model (fake-quant state), greedy forward selection: each step
/// moves to the first available candidate the weighted layer whose move gives
/// the highest output SQNR against the float model on `ranking_data` (earlier
/// moves in place), then measures the metric on `held_out`; it stops when the
/// metric is within the target or `max_layers` were moved. Cost: up to
/// max_layers x layers forward passes over the ranking samples, and one over
/// the held-out samples per step. Moving to "int16" requantizes the layer's
/// output activation (its FakeQuantize, shared with ops that share its qparams)
/// to s16 from the statistics already observed; the layer's weights stay 8-bit
/// and the next layer reads int16 (a 16x8 layer). Moving to "float" disables the
/// layer's weight FakeQuantize; its activations stay quantized, as prepare_fx
/// quantizes them for a module whose qconfig is null (its neighbours' int8 ops
/// read and write them). The moves stay in place on return; the model to deploy
/// is prepared again with the moved layers' qconfig (null, or s16 activations:
/// `quant::ptq` does this and writes that config). "int16" is noted as skipped
/// where the target offers no s16. Throws ArgumentError for
/// an unknown metric or candidate, no available candidate, no held-out data,
/// "top1" without labels or a label count different from the samples', or a
/// model output that is not one tensor ([N, classes] for top1). With
/// `reference` (the float weights taken before AdaRound and bias correction), a
/// layer in float computes with its float weight and bias, as it will once
/// prepared again.
AutoFallbackResult auto_fallback(fx::GraphModule& gm, const NextBatch& ranking_data, const HeldOutData& held_out,
                                 const AutoFallbackOptions& options = {}, const FloatWeights* reference = nullptr);

/// Options of `range_search` (the `ptq.range_search` section of a PTQ config).
struct RangeSearchOptions {
  /// The range algorithms tried, in order (the first wins a tie).
  std::vector<Algorithm> candidates{Algorithm::kMinMax, Algorithm::kPercentile, Algorithm::kEntropy, Algorithm::kMSE,
                                    Algorithm::kAuto};
  int64_t num_samples = 256;  ///< calibration samples the outputs are compared on
  /// After the model-wide choice, one pass in graph order in which each activation
  /// takes the candidate that raises the output SQNR most with the others held:
  /// (activations x (candidates - 1)) more passes over the samples.
  bool per_tensor = false;
};

/// One candidate of `range_search`: the model's output SQNR with it.
struct RangeCandidate {
  std::string algorithm;  ///< algorithm_name of the candidate
  double sqnr_db = 0;     ///< output SQNR (dB) against the float model, every output flattened and concatenated
};

/// What `range_search` measured and chose.
struct RangeSearchResult {
  std::string configured;                 ///< the algorithm calibration ran with ("mixed" when observers differ)
  std::string chosen;                     ///< the model-wide choice
  double sqnr_db = 0;                     ///< output SQNR (dB) as left in place (per-tensor choices included)
  int64_t per_tensor_changes = 0;         ///< per_tensor: activations given another algorithm than `chosen`
  int64_t samples = 0;                    ///< calibration samples compared
  int64_t tensors = 0;                    ///< histogram-observed activation tensors it set
  std::vector<RangeCandidate> candidates; ///< in the order tried
};

/// Output-aware choice of the activation range algorithm (the calibration
/// method search of Horizon's hb_mapper and TensorRT's calibrator comparison,
/// done on the model's output rather than per tensor): on a calibrated model
/// (fake-quant state, observers off), for each candidate every activation
/// FakeQuantize whose observer is a HistogramObserver gets that algorithm over
/// its recorded histogram, and the model runs on up to `num_samples` samples of
/// `data`; the candidate with the highest output SQNR against the float model
/// stays in place (its qparams are the ones convert exports); with `per_tensor`,
/// single activations then move to another candidate where that raises the
/// output SQNR (greedy, one pass in graph order). Weight observers
/// and non-histogram observers are untouched. Cost: one float pass and one
/// fake-quantized pass per candidate. Throws ArgumentError when the model has
/// no histogram-observed activation, when there are no candidates or no data,
/// or when an output is not a tensor (tuples, lists and dicts of tensors are
/// flattened).
RangeSearchResult range_search(fx::GraphModule& gm, const NextBatch& data, const RangeSearchOptions& options = {});

/// Sets `algorithm` on every histogram-observed activation of `gm` and
/// recomputes their qparams (what `range_search` leaves in place, applied to a
/// model calibrated again). Returns how many observers it set.
int64_t set_activation_range_algorithm(fx::GraphModule& gm, Algorithm algorithm);

/// How many activation FakeQuantizes of `gm` (graph nodes, weights excluded)
/// observe through a HistogramObserver: what `range_search` can change.
int64_t count_histogram_activations(fx::GraphModule& gm);

}  // namespace qfx::quant
