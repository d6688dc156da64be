// AdaRound (see ptq_algorithms.h).
#include <ATen/ATen.h>
#include <torch/optim/adam.h>

#include <chrono>
#include <cmath>
#include <random>

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
  std::vector<LayerAlgorithmReport> out;
  std::mt19937_64 rng(o.seed);
  int64_t done = 0;
  for (const auto& l : layers) {
    const auto t0 = std::chrono::steady_clock::now();
    FusedConvLinear& f = *l.module;
    FakeQuantize* fq = f.weight_fake_quant();
    if (fq->learnable() || f.bn_simulated() || !ref.layers.count(l.path)) continue;
    // Inputs: the float model's (target) and the fake-quantized model's (earlier layers rounded).
    const auto inputs = detail::capture_float_and_quantized_input(gm, l.path, samples, ref);
    const at::Tensor& x_float = inputs.first;
    const at::Tensor& x_quant = inputs.second;

    at::NoGradGuard ng;
    const auto& [w_ref, b_ref] = ref.layers.at(l.path);
    const at::Tensor target = apply_activation(f.preactivation(x_float, w_ref, b_ref), f.activation());
    if (!fq->observer().has_data() && !fq->qparams_frozen()) {  // not calibrated: observe the weight now
      fq->enable_observer(true);
      fq->forward(f.weight().detach());
      fq->disable_observer();
    }
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

    // V such that h(V) = rest: the soft-quantized weight starts at the float weight.
    at::Tensor v = at::log((rest - kGamma) / (kZeta - rest)).detach().requires_grad_(true);
    {
      c10::AutoGradMode grad(true);
      torch::optim::Adam opt({v}, torch::optim::AdamOptions(o.lr));
      const int64_t n = x_quant.size(0);
      const int64_t warm = static_cast<int64_t>(o.warmup * static_cast<double>(o.iterations));
      std::uniform_int_distribution<int64_t> pick(0, n - 1);
      for (int64_t it = 0; it < o.iterations; ++it) {
        std::vector<int64_t> idx(static_cast<size_t>(std::min(o.batch_size, n)));
        for (auto& i : idx) i = pick(rng);
        const at::Tensor sel = at::tensor(idx, at::kLong);
        const at::Tensor xb = x_quant.index_select(0, sel), yb = target.index_select(0, sel);
        const at::Tensor h = rectified_sigmoid(v);
        const at::Tensor w_soft = dequant(w_floor + h, g);
        const at::Tensor y = apply_activation(f.preactivation(xb, w_soft, bias), f.activation());
        at::Tensor loss = (y - yb).pow(2).reshape({y.size(0), -1}).sum(1).mean();
        if (it >= warm) {
          const double progress = static_cast<double>(it - warm) / static_cast<double>(std::max<int64_t>(o.iterations - warm, 1));
          const double beta = o.beta_end + (o.beta_start - o.beta_end) * (1.0 - progress);
          loss = loss + o.reg * (1 - (2 * h - 1).abs().pow(beta)).sum();
        }
        opt.zero_grad();
        loss.backward();
        opt.step();
      }
    }
    const at::Tensor w_round = dequant(w_floor + (v.detach() >= 0).to(at::kFloat), g);
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
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.push_back(r);
    if (o.progress) o.progress(l.path, ++done, static_cast<int64_t>(layers.size()));
  }
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  return out;
}

}  // namespace qfx::quant
