// The requantization multipliers int8 kernels share: every backend and the
// integer-parameter report (Model::integer_ops) compute them here, in one order.
#include <algorithm>

#include "kernels.h"

namespace qfx::runtime {

std::vector<float> accumulator_multipliers(const ir::Node& n, int64_t M, std::vector<float>* in_w) {
  const ir::QInfo &xq = n.in_q.at(0), &wq = n.in_q.at(1), &yq = n.out_q;
  std::vector<float> mult(static_cast<size_t>(M)), xw(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    const size_t i = static_cast<size_t>(m);
    xw[i] = xq.scale[0] * (wq.scale.size() == 1 ? wq.scale[0] : wq.scale[i]);
    mult[i] = xw[i] / yq.scale[0];
  }
  if (in_w) *in_w = std::move(xw);
  return mult;
}

std::vector<double> exact_accumulator_multipliers(const ir::Node& n, int64_t M) {
  const ir::QInfo &xq = n.in_q.at(0), &wq = n.in_q.at(1), &yq = n.out_q;
  std::vector<double> mult(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    const double w = wq.scale.size() == 1 ? wq.scale[0] : wq.scale[static_cast<size_t>(m)];
    mult[static_cast<size_t>(m)] = static_cast<double>(xq.scale[0]) * w / static_cast<double>(yq.scale[0]);
  }
  return mult;
}

Requantizer accumulator_requantizer(const ir::Node& n, const std::vector<float>& mult) {
  return Requantizer::accumulator(n.arithmetic, mult, n.label(), exact_accumulator_multipliers(n, static_cast<int64_t>(mult.size())));
}

bool single_rounding_fully_connected(const ir::Node& n) {
  return n.arithmetic.fully_connected_single_rounding && n.arithmetic.requantize == RequantMode::kFixedPoint &&
         (n.op == "QGemm" || n.op == "QLinearMatMul");
}

bool divides_average_pool(const ir::Node& n) {
  return n.arithmetic.average_pool_divide && !n.in_q.empty() && n.in_q[0].scale == n.out_q.scale &&
         n.in_q[0].zero_point == n.out_q.zero_point;
}

// The rescales of int8 Add / Mul, their multipliers in double as TFLite's add.cc /
// mul.cc compute them (float32 for ONNX's arithmetic).
ElementwiseRescales elementwise_rescales(const ir::Node& n) {
  const float sa = n.in_q.at(0).scale[0], sb = n.in_q.at(1).scale[0], sy = n.out_q.scale[0];
  const Arithmetic& ar = n.arithmetic;
  if (n.op == "QLinearMul")
    return {{}, {}, Requantizer::rescale(ar, {sa * sb / sy}, n.label(), {double(sa) * double(sb) / double(sy)})};
  const float twice_max = 2.0f * std::max(sa, sb);
  const float shifted = static_cast<float>(int64_t{1} << ar.elementwise_left_shift);
  const float out = twice_max / (shifted * sy);
  return {Requantizer::rescale(ar, {sa / twice_max}, n.label(), {double(sa) / double(twice_max)}),
          Requantizer::rescale(ar, {sb / twice_max}, n.label(), {double(sb) / double(twice_max)}),
          Requantizer::rescale(ar, {out}, n.label(), {double(twice_max) / (double(shifted) * double(sy))})};
}

}  // namespace qfx::runtime
