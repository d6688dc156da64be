// Model::integer_ops: the integer parameters of every int8 op under the model's
// arithmetic, computed with the helpers the kernels use (rescales.cpp).
#include "model_impl.h"
#include "qfx/runtime/op_schema.h"

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

// The rescales of int8 op `n` as its schema's Rescale says; false for an op that
// does not requantize (moves codes, or not an integer form).
bool describe_rescales(const ir::Node& n, Rescale kind, IntegerOp& o) {
  const Arithmetic& ar = n.arithmetic;
  auto to_output = [&](size_t i) { return Requantizer::rescale(ar, {n.in_q[i].scale[0] / n.out_q.scale[0]}, n.label()); };
  switch (kind) {
    case Rescale::kAccumulator: {
      o.accumulator_bits = n.in_q.at(0).dtype == DType::kInt16 ? 64 : ar.accumulator_bits;
      const int64_t M = static_cast<int64_t>(n.in_q.at(1).scale.size());
      o.rescales.push_back(describe("output", accumulator_requantizer(n, accumulator_multipliers(n, M))));
      return true;
    }
    case Rescale::kElementwise: {
      if (ar.elementwise == RequantMode::kFloat) {
        for (size_t i = 0; i < 2; ++i) o.rescales.push_back(describe(i ? "input_b" : "input_a", to_output(i)));
        return true;
      }
      const ElementwiseRescales r = elementwise_rescales(n);
      if (n.op == "QLinearAdd") {  // a product needs no common input scale
        o.rescales.push_back(describe("input_a", r.a));
        o.rescales.push_back(describe("input_b", r.b));
      }
      o.rescales.push_back(describe("output", r.out));
      return true;
    }
    case Rescale::kWindowAverage:
      if (divides_average_pool(n)) return false;  // the sum of codes / count: no multiplier (Arithmetic::average_pool_divide)
      o.per_window_count = true;
      [[fallthrough]];
    case Rescale::kPerInput:
      for (size_t i = 0; i < n.in_q.size(); ++i)
        o.rescales.push_back(describe(n.in_q.size() > 1 ? "input_" + std::to_string(i) : "output", to_output(i)));
      return true;
    case Rescale::kTable: {
      const auto& t = n.attrs.at("table").ints;
      o.table.assign(t.begin(), t.end());
      return true;
    }
    case Rescale::kIntegerOnly:  // listed with their dtypes; every constant follows from the qparams (integer_only.h)
    case Rescale::kSoftmax:      // likewise (Arithmetic::softmax_fixed_point)
      return true;
    case Rescale::kNone:
      return false;
  }
  return false;
}

}  // namespace

const Arithmetic& Model::arithmetic() const { return impl_->g.arithmetic; }

std::vector<IntegerOp> Model::integer_ops() const {
  std::vector<IntegerOp> ops;
  for (const ir::Node& n : impl_->g.nodes) {
    const OpSchema* s = find_op_schema(n.op);
    IntegerOp o;
    o.node = n.name;
    o.op = n.op;
    if (!n.in_q.empty()) o.input_dtype = dtype_name(n.in_q[0].dtype);
    o.output_dtype = dtype_name(n.out_q.dtype);
    if (!s || !describe_rescales(n, s->rescale, o)) continue;
    ops.push_back(std::move(o));
  }
  return ops;
}

}  // namespace qfx::runtime
