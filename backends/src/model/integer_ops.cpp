// Model::integer_ops: the integer parameters of every int8 op under the model's
// arithmetic, computed with the helpers the kernels use (rescales.cpp).
#include "model_impl.h"

namespace qfx::runtime {
namespace {

IntegerRescale describe(const std::string& name, const Requantizer& r) {
  IntegerRescale d;
  d.name = name;
  d.mode = r.mode();
  d.multiplier = r.multipliers();
  d.multiplier_bits = r.bits();
  for (const auto& q : r.quantized()) {
    d.fixed_multiplier.push_back(q.multiplier);
    d.shift.push_back(q.shift);
  }
  return d;
}

}  // namespace

const Arithmetic& Model::arithmetic() const { return impl_->g.arithmetic; }

std::vector<IntegerOp> Model::integer_ops() const {
  std::vector<IntegerOp> ops;
  for (const ir::Node& n : impl_->g.nodes) {
    IntegerOp o;
    o.node = n.name;
    o.op = n.op;
    if (!n.in_q.empty()) o.input_dtype = dtype_name(n.in_q[0].dtype);
    o.output_dtype = dtype_name(n.out_q.dtype);
    const Arithmetic& ar = n.arithmetic;
    if (n.op == "QLinearConv" || n.op == "QGemm" || n.op == "QLinearMatMul") {
      o.accumulator_bits = n.in_q.at(0).dtype == DType::kInt16 ? 64 : ar.accumulator_bits;
      const int64_t M = static_cast<int64_t>(n.in_q.at(1).scale.size());
      o.rescales.push_back(describe("output", Requantizer::accumulator(ar, accumulator_multipliers(n, M), n.label())));
    } else if (n.op == "QLinearAdd" || n.op == "QLinearMul") {
      if (ar.elementwise == RequantMode::kFloat) {
        for (size_t i = 0; i < 2; ++i)
          o.rescales.push_back(describe(i ? "input_b" : "input_a",
                                        Requantizer::rescale(ar, {n.in_q[i].scale[0] / n.out_q.scale[0]}, n.label())));
      } else {
        const ElementwiseRescales r = elementwise_rescales(n);
        if (n.op == "QLinearAdd") {
          o.rescales.push_back(describe("input_a", r.a));
          o.rescales.push_back(describe("input_b", r.b));
        }
        o.rescales.push_back(describe("output", r.out));
      }
    } else if (n.op == "QRelu" || n.op == "QClip" || n.op == "QLinearConcat" || n.op == "QLinearAveragePool" ||
               n.op == "QLinearGlobalAveragePool") {
      o.per_window_count = n.op == "QLinearAveragePool" || n.op == "QLinearGlobalAveragePool";
      for (size_t i = 0; i < n.in_q.size(); ++i)
        o.rescales.push_back(describe(n.in_q.size() > 1 ? "input_" + std::to_string(i) : "output",
                                      Requantizer::rescale(ar, {n.in_q[i].scale[0] / n.out_q.scale[0]}, n.label())));
    } else if (n.op == "QLut") {
      const auto& t = n.attrs.at("table").ints;
      o.table.assign(t.begin(), t.end());
    } else if (n.op == "QIntGelu" || n.op == "QIntSoftmax" || n.op == "QIntLayerNorm") {
      // Integer-only ops: listed with their dtypes; every constant follows from the
      // qparams around them (qfx/runtime/integer_only.h).
    } else {
      continue;
    }
    ops.push_back(std::move(o));
  }
  return ops;
}

}  // namespace qfx::runtime
