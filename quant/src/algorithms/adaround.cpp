// AdaRound (see ptq_algorithms.h).
#include <ATen/ATen.h>
#include <torch/optim/adam.h>

#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "layers.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/error.h"

namespace qfx::quant {
namespace {

constexpr double kZeta = 1.1, kGamma = -0.1;  // rectified sigmoid stretch (the paper's values)

at::Tensor rectified_sigmoid(const at::Tensor& v) { return at::clamp(at::sigmoid(v) * (kZeta - kGamma) + kGamma, 0, 1); }

// What a weight FakeQuantize computes, in broadcastable form.
struct WeightGrid {
  at::Tensor scale, zero_point;  // broadcast along the weight's channel axis (or 0-dim)
  double qmin = 0, qmax = 0;
};

WeightGrid grid_of(FakeQuantize& fq, const FusedConvLinear& f) {
  const QParams q = fq.qparams();
  WeightGrid g;
  const at::Tensor w = f.weight();
  g.scale = q.per_channel ? detail::along(q.scale.to(at::kFloat), w.dim(), q.axis) : q.scale.to(at::kFloat).reshape({});
  g.zero_point = q.per_channel ? detail::along(q.zero_point.to(at::kFloat), w.dim(), q.axis)
                               : q.zero_point.to(at::kFloat).reshape({});
  g.qmin = static_cast<double>(q.quant_min);
  g.qmax = static_cast<double>(q.quant_max);
  return g;
}

at::Tensor dequant(const at::Tensor& codes_minus_zp_free, const WeightGrid& g) {
  return (at::clamp(codes_minus_zp_free + g.zero_point, g.qmin, g.qmax) - g.zero_point) * g.scale;
}

// One layer's AdaRound problem: its fake-quantized input and float target output, its
// bias, the weight's grid and the weight's floor on that grid.
struct LayerProblem {
  FusedConvLinear& f;
  const at::Tensor& x_quant;
  const at::Tensor& target;
  const at::Tensor& bias;
  const WeightGrid& g;
  const at::Tensor& w_floor;
};

// The loss of iteration `it` on the samples `sel`: the squared output error of the soft-quantized
// weight h(V), plus (after `warm` iterations) the rounding regularizer with beta annealed.
at::Tensor soft_loss(const LayerProblem& p, const at::Tensor& v, const at::Tensor& sel, int64_t it, int64_t warm,
                     const AdaRoundOptions& o) {
  const at::Tensor xb = p.x_quant.index_select(0, sel), yb = p.target.index_select(0, sel);
  const at::Tensor h = rectified_sigmoid(v);
  const at::Tensor w_soft = dequant(p.w_floor + h, p.g);
  const at::Tensor y = apply_activation(p.f.preactivation(xb, w_soft, p.bias), p.f.activation());
  at::Tensor loss = (y - yb).pow(2).reshape({y.size(0), -1}).sum(1).mean();
  if (it >= warm) {
    const double progress = static_cast<double>(it - warm) / static_cast<double>(std::max<int64_t>(o.iterations - warm, 1));
    const double beta = o.beta_end + (o.beta_start - o.beta_end) * (1.0 - progress);
    loss = loss + o.reg * (1 - (2 * h - 1).abs().pow(beta)).sum();
  }
  return loss;
}

// Learns V with Adam over random batches of the layer's samples, starting where h(V) = rest
// (the soft-quantized weight at the float weight); returns V detached.
at::Tensor learn_v(const LayerProblem& p, const at::Tensor& rest, const AdaRoundOptions& o, std::mt19937_64& rng) {
  at::Tensor v = at::log((rest - kGamma) / (kZeta - rest)).detach().requires_grad_(true);
  c10::AutoGradMode grad(true);
  torch::optim::Adam opt({v}, torch::optim::AdamOptions(o.lr));
  const int64_t n = p.x_quant.size(0);
  const int64_t warm = static_cast<int64_t>(o.warmup * static_cast<double>(o.iterations));
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  for (int64_t it = 0; it < o.iterations; ++it) {
    std::vector<int64_t> idx(static_cast<size_t>(std::min(o.batch_size, n)));
    for (auto& i : idx) i = pick(rng);
    const at::Tensor sel = at::tensor(idx, at::kLong);
    at::Tensor loss = soft_loss(p, v, sel, it, warm, o);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  return v.detach();
}

// AdaRound on layer `l`: learns its rounding, keeps it where the output SQNR beats rounding to
// nearest, and writes the chosen codes as the layer's weight (a copy; qparams frozen).
LayerAlgorithmReport adaround_layer(fx::GraphModule& gm, const detail::WeightedLayer& l,
                                    const std::vector<std::vector<at::Tensor>>& samples, const FloatWeights& ref,
                                    const AdaRoundOptions& o, std::mt19937_64& rng) {
  FusedConvLinear& f = *l.module;
  FakeQuantize* fq = f.weight_fake_quant();
  // Inputs: the float model's (target) and the fake-quantized model's (earlier layers rounded).
  const auto inputs = detail::capture_float_and_quantized_input(gm, l.path, samples, ref);
  const at::Tensor& x_float = inputs.first;
  const at::Tensor& x_quant = inputs.second;

  at::NoGradGuard ng;
  const auto& [w_ref, b_ref] = ref.layers.at(l.path);
  const at::Tensor target = apply_activation(f.preactivation(x_float, w_ref, b_ref), f.activation());
  detail::observe_weight_if_uncalibrated(*fq, f);
  const WeightGrid g = grid_of(*fq, f);  // qparams from the observed (original) weight
  const at::Tensor bias = f.bias().defined() ? f.bias().detach() : at::Tensor();
  const at::Tensor w = f.weight().detach().clone();
  const at::Tensor w_floor = at::floor(w / g.scale);
  const at::Tensor rest = (w / g.scale - w_floor).clamp(1e-4, 1 - 1e-4);
  auto eval_error = [&](const at::Tensor& wq) {
    return detail::sqnr_db(target, apply_activation(f.preactivation(x_quant, wq, bias), f.activation()));
  };
  const at::Tensor w_nearest = dequant(at::round(w / g.scale), g);  // what the FakeQuantize computes
  const double before = eval_error(w_nearest);

  const at::Tensor v = learn_v(LayerProblem{f, x_quant, target, bias, g, w_floor}, rest, o, rng);
  const at::Tensor w_round = dequant(w_floor + (v >= 0).to(at::kFloat), g);
  const double after = eval_error(w_round);
  LayerAlgorithmReport r;
  r.layer = l.path;
  r.sqnr_before_db = before;
  r.kept = after > before ? "adaround" : "nearest";
  r.sqnr_after_db = std::max(after, before);
  // The codes become the weight (a copy: the user's model keeps its float weight);
  // freezing the qparams keeps them the codes.
  fq->freeze_qparams();
  f.unshare_parameters();
  f.weight().detach().copy_(after > before ? w_round : w_nearest);
  return r;
}

}  // namespace

std::vector<LayerAlgorithmReport> adaround(fx::GraphModule& gm, const NextBatch& data, const AdaRoundOptions& o,
                                           const FloatWeights* reference) {
  if (o.iterations < 1 || o.batch_size < 1 || o.num_samples < 1 || !(o.lr > 0) || o.warmup < 0 || o.warmup >= 1)
    throw ArgumentError("adaround: iterations, batch_size, num_samples and lr must be positive, warmup in [0, 1)");
  const FloatWeights own = reference ? FloatWeights{} : snapshot_float_weights(gm);
  const FloatWeights& ref = reference ? *reference : own;
  const auto samples = detail::take_samples(data, o.num_samples);
  if (samples.empty()) throw ArgumentError("adaround: no calibration data");
  const auto layers = detail::weighted_layers(gm);
  for (const auto& l : layers)  // its grid is per tensor or per channel
    if (l.module->weight_fake_quant()->observer().spec().block_size > 0)
      throw ConfigError("ptq.adaround: layer '" + l.path + "' has block-wise weights (block_size " +
                        std::to_string(l.module->weight_fake_quant()->observer().spec().block_size) +
                        "), which AdaRound does not support; use ptq.gptq, or per_channel weights");
  std::vector<LayerAlgorithmReport> out;
  std::mt19937_64 rng(o.seed);
  int64_t done = 0;
  for (const auto& l : layers) {
    const auto t0 = std::chrono::steady_clock::now();
    const FusedConvLinear& f = *l.module;
    if (f.weight_fake_quant()->learnable() || f.bn_simulated() || !ref.layers.count(l.path)) continue;
    LayerAlgorithmReport r = adaround_layer(gm, l, samples, ref, o, rng);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.push_back(r);
    if (o.progress) o.progress(l.path, ++done, static_cast<int64_t>(layers.size()));
  }
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  return out;
}

}  // namespace qfx::quant
