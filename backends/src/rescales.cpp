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

ElementwiseRescales elementwise_rescales(const ir::Node& n) {
  const float sa = n.in_q.at(0).scale[0], sb = n.in_q.at(1).scale[0], sy = n.out_q.scale[0];
  if (n.op == "QLinearMul") return {{}, {}, Requantizer::rescale(n.arithmetic, {sa * sb / sy}, n.label())};
  const float twice_max = 2.0f * std::max(sa, sb);
  const float out = twice_max / (static_cast<float>(int64_t{1} << n.arithmetic.elementwise_left_shift) * sy);
  return {Requantizer::rescale(n.arithmetic, {sa / twice_max}, n.label()),
          Requantizer::rescale(n.arithmetic, {sb / twice_max}, n.label()), Requantizer::rescale(n.arithmetic, {out}, n.label())};
}

}  // namespace qfx::runtime
