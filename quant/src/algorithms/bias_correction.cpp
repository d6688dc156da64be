// Empirical bias correction (see ptq_algorithms.h).
#include <ATen/ATen.h>

#include <chrono>

#include "layers.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/error.h"

namespace qfx::quant {

std::vector<LayerAlgorithmReport> bias_correction(fx::GraphModule& gm, const NextBatch& data, int64_t num_samples,
                                                  const FloatWeights* reference) {
  if (num_samples < 1) throw ArgumentError("bias_correction: num_samples must be positive");
  const FloatWeights own = reference ? FloatWeights{} : snapshot_float_weights(gm);
  const FloatWeights& ref = reference ? *reference : own;
  const auto samples = detail::take_samples(data, num_samples);
  if (samples.empty()) throw ArgumentError("bias_correction: no calibration data");
  std::vector<LayerAlgorithmReport> out;
  for (const auto& l : detail::weighted_layers(gm)) {
    const auto t0 = std::chrono::steady_clock::now();
    FusedConvLinear& f = *l.module;
    FakeQuantize* fq = f.weight_fake_quant();
    if (f.bn_simulated() || !ref.layers.count(l.path)) continue;
    const auto inputs = detail::capture_float_and_quantized_input(gm, l.path, samples, ref);
    const at::Tensor& x_float = inputs.first;
    const at::Tensor& x_quant = inputs.second;

    at::NoGradGuard ng;
    const auto& [w_ref, b_ref] = ref.layers.at(l.path);
    const at::Tensor y_float = f.preactivation(x_float, w_ref, b_ref);
    const at::Tensor w_q = fq->forward(f.weight().detach());  // fake-quant state: the deployed weight
    const at::Tensor b_now = f.bias().defined() ? f.bias().detach() : at::zeros_like(b_ref);
    const at::Tensor y_quant = f.preactivation(x_quant, w_q, b_now);
    const int64_t axis = detail::output_axis(f, y_quant);
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < y_quant.dim(); ++d)
      if (d != axis) dims.push_back(d);
    const at::Tensor shift = (y_quant - y_float).mean(dims);  // [C_out]
    LayerAlgorithmReport r;
    r.layer = l.path;
    r.sqnr_before_db = detail::sqnr_db(y_float, y_quant);
    const at::Tensor corrected = b_now - shift;
    f.unshare_parameters();  // the user's model keeps its bias
    if (f.bias().defined()) f.bias().detach().copy_(corrected);
    else f.add_bias(corrected);
    r.sqnr_after_db = detail::sqnr_db(y_float, y_quant - detail::along(shift, y_quant.dim(), axis));
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.push_back(r);
  }
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  return out;
}

}  // namespace qfx::quant
