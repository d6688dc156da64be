// The target's `arithmetic.softmax: fixed_point`: DequantizeLinear -> Softmax ->
// QuantizeLinear on 8-bit per-tensor codes becomes QLinearSoftmax, TFLite's int8
// SOFTMAX (reference/qsoftmax.cpp), when the output is in its steps (scale 1/256,
// zero point the lowest code); other groups stay float.
#include "qdq_match.h"

namespace qfx::runtime::ir::qdq {

bool fuse_softmax(Ctx& c, size_t i, const Ctx::DQ& d0) {
  const Node& n = c.g.nodes[i];
  if (!c.g.arithmetic.softmax_fixed_point || n.op != "Softmax" || n.inputs.size() != 1) return false;
  if (!eight_bit_per_tensor(d0.q)) return false;
  auto t = c.tail(i, false);
  // TFLite's kernel writes codes in steps of 1/256 from the type's lowest code.
  if (!t || !eight_bit_per_tensor(t->q) || t->q.scale[0] != 1.0f / 256 || t->q.zero_point[0] != (t->q.dtype == DType::kInt8 ? -128 : 0))
    return false;
  Node f = n;
  f.op = "QLinearSoftmax";
  f.inputs = {d0.quantized};
  f.in_q = {d0.q};
  f.attrs.clear();
  f.attrs["axis"] = int_attr(n.attr_i("axis", -1));
  c.replace(i, f, *t);
  return true;
}

}  // namespace qfx::runtime::ir::qdq
