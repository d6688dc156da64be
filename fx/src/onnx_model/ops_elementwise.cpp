// ONNX elementwise and reduction ops: the shared unary table's rows
// (qfx/fx/onnx_unary_ops.h) and the patterns around them (GELU from Erf, Mish from
// Softplus), arithmetic (on tensors and on shape values), comparisons, Clip, Cast,
// Constant, Softmax, Reduce*.
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>

#include <cmath>

#include "builder.h"
#include "proto.h"
#include "qfx/fx/onnx_unary_ops.h"

namespace qfx::fx::onnx_detail {
namespace {

// A row of the shared unary table (qfx/fx/onnx_unary_ops.h): the aten op with its
// arguments read from the node's attributes. False (nothing emitted) when an
// attribute the row fixes holds another value.
bool read_unary(Builder& b, const UnaryOnnxOp& r) {
  for (const auto& f : r.fixed)
    if (std::abs(attr_f(b.node(), f.name, f.onnx_default) - f.value) >= 1e-6) return false;
  std::vector<Argument> args = {Argument(b.tensor(0))};
  for (const auto& a : r.arguments) {
    const double v = a.attribute.empty() ? a.value : static_cast<double>(attr_f(b.node(), a.attribute, static_cast<float>(a.value)));
    args.emplace_back(c10::IValue(v));
  }
  b.bind(0, b.call(r.target, std::move(args)));
  return true;
}

Converter unary(const UnaryOnnxOp& r) {
  return [&r](Builder& b) {
    if (!read_unary(b, r)) b.fail("attributes other than the ones aten::" + r.aten + " computes with");
  };
}

// The table row of ONNX op `onnx` (a row the converters below extend).
const UnaryOnnxOp& row(const char* onnx) { return *find_unary_onnx_op(onnx); }

c10::IValue scalar_of(const at::Tensor& c) {
  return c.is_floating_point() ? c10::IValue(c.item<double>()) : c10::IValue(c.item<int64_t>());
}

// A one-element constant operand that can be a Scalar argument (it does not
// change the result's shape).
bool scalar_operand(Builder& b, size_t c, size_t x) {
  const Value& v = b.in(c);
  return v.constant.defined() && v.constant.numel() == 1 && !b.in(x).constant.defined() && b.in(x).sym.empty() &&
         v.constant.dim() <= b.rank(x);
}

bool equal_element(Builder& b, const Argument& x, const Argument& y) {
  const bool cx = x.kind == Argument::Kind::kConst, cy = y.kind == Argument::Kind::kConst;
  if (cx && cy) return x.value.toInt() == y.value.toInt();
  const int64_t c = cx ? x.value.toInt() : cy ? y.value.toInt() : 0;
  if ((cx || cy) && c < 0) return false;
  b.fail("compares a dynamic size with " + (cx || cy ? std::to_string(c) : std::string("another dynamic size")) +
         "; fix the input shape (model.input_shape) so qfx can fold it");
}

// Integer arithmetic on shape elements (broadcasting one element).
bool shape_arith(Builder& b, char op) {
  if (b.in(0).sym.empty() && b.in(1).sym.empty()) return false;
  auto ea = shape_elements(b.in(0)), eb = shape_elements(b.in(1));
  if (!ea || !eb) b.fail("arithmetic between a shape and a tensor computed at run time");
  const size_t n = std::max(ea->size(), eb->size());
  if ((ea->size() != n && ea->size() != 1) || (eb->size() != n && eb->size() != 1)) b.fail("shape vectors of different lengths");
  static const std::map<char, std::string> ops = {{'+', "aten::add.int"}, {'-', "aten::sub.int"}, {'*', "aten::mul.int"}, {'/', "aten::floordiv.int"}, {'%', "aten::remainder.int"}};
  std::vector<Argument> out;
  for (size_t i = 0; i < n; ++i) {
    const Argument& x = (*ea)[ea->size() == 1 ? 0 : i];
    const Argument& y = (*eb)[eb->size() == 1 ? 0 : i];
    if (op == '=') {  // a run-time element is a size (>= 0): equal to a negative constant never
      out.emplace_back(c10::IValue(int64_t{equal_element(b, x, y)}));
    } else if (x.kind == Argument::Kind::kConst && y.kind == Argument::Kind::kConst) {
      const int64_t p = x.value.toInt(), q = y.value.toInt();
      const int64_t r = op == '+' ? p + q : op == '-' ? p - q : op == '*' ? p * q : !q ? 0 : op == '/' ? p / q : ((p % q) + q) % q;
      out.emplace_back(c10::IValue(r));
    } else {
      out.emplace_back(b.node_of(b.call(ops.at(op), {x, y})));
    }
  }
  const bool scalar = (b.in(0).sym_scalar || (b.in(0).constant.defined() && b.in(0).constant.dim() == 0)) &&
                      (b.in(1).sym_scalar || (b.in(1).constant.defined() && b.in(1).constant.dim() == 0));
  b.bind(0, shape_value(std::move(out), scalar));
  return true;
}

Converter binary(const char* name, char sym_op, bool commutative) {
  const std::string op = std::string("aten::") + name;
  return [op, sym_op, commutative](Builder& b) {
    if (sym_op && shape_arith(b, sym_op)) return;
    if (scalar_operand(b, 1, 0)) {
      b.bind(0, b.call(op + ".Scalar", {Argument(b.tensor(0)), Argument(scalar_of(b.in(1).constant))}));
    } else if (scalar_operand(b, 0, 1) && (commutative || sym_op == '-')) {
      const std::string target = commutative ? op + ".Scalar" : "aten::rsub.Scalar";
      b.bind(0, b.call(target, {Argument(b.tensor(1)), Argument(scalar_of(b.in(0).constant))}));
    } else {
      b.bind(0, b.call(op + ".Tensor", {Argument(b.tensor(0)), Argument(b.tensor(1))}));
    }
  };
}

void pow(Builder& b) {
  if (scalar_operand(b, 1, 0))
    b.bind(0, b.call("aten::pow.Tensor_Scalar", {Argument(b.tensor(0)), Argument(scalar_of(b.in(1).constant))}));
  else
    b.bind(0, b.call("aten::pow.Tensor_Tensor", {Argument(b.tensor(0)), Argument(b.tensor(1))}));
}

// An optional one-element constant input as a Scalar argument (None when absent).
Argument bound(Builder& b, size_t i, bool* given, double* value) {
  *given = b.has_input(i);
  if (!*given) return Argument();
  const at::Tensor c = b.constant(i, i == 1 ? "min" : "max");
  if (c.numel() != 1) b.fail("Clip bounds must be single values");
  *value = c.item<double>();
  return Argument(c10::IValue(*value));
}

void clip(Builder& b) {
  bool has_min = false, has_max = false;
  double lo = 0, hi = 0;
  Argument mn, mx;
  if (b.opset() < 11) b.fail("Clip with attribute bounds (opset < 11)");
  mn = bound(b, 1, &has_min, &lo);
  mx = bound(b, 2, &has_max, &hi);
  Node* x = b.tensor(0);
  if (has_min && lo == 0.0 && !has_max) b.bind(0, b.call("aten::relu", {Argument(x)}));
  else if (has_min && has_max) b.bind(0, b.call("aten::hardtanh", {Argument(x), mn, mx}));
  else b.bind(0, b.call("aten::clamp", {Argument(x), mn, mx}));
}

// HardSigmoid with alpha 1/6 and beta 1/2 is aten::hardsigmoid (the table's row);
// others are max(0, min(1, alpha * x + beta)).
void hard_sigmoid(Builder& b) {
  if (read_unary(b, row("HardSigmoid"))) return;
  const double alpha = attr_f(b.node(), "alpha", 0.2f), beta = attr_f(b.node(), "beta", 0.5f);
  Node* x = b.tensor(0);
  Node* y = b.node_of(b.call("aten::mul.Scalar", {Argument(x), Argument(c10::IValue(alpha))}));  // constants fold
  y = b.node_of(b.call("aten::add.Scalar", {Argument(y), Argument(c10::IValue(beta))}));
  b.bind(0, b.call("aten::hardtanh", {Argument(y), Argument(c10::IValue(0.0)), Argument(c10::IValue(1.0))}));
}

// The constant operand of a two-input node whose other input is `x`, or undefined.
at::Tensor other_constant(const Builder& b, const onnx::NodeProto& n, const std::string& x) {
  if (n.input_size() != 2) return at::Tensor();
  const std::string& o = n.input(0) == x ? n.input(1) : n.input(1) == x ? n.input(0) : x;
  return o == x ? at::Tensor() : b.constant_named(o);
}

bool near(const at::Tensor& c, double v) { return c.defined() && c.numel() == 1 && std::abs(c.item<double>() - v) < 1e-4 * std::abs(v); }

// Erf inside GELU as the TorchScript-based exporter writes it,
// Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5), is read as aten::gelu(x): one
// quantized op, as PyTorch has it. Any other Erf is aten::erf.
void erf(Builder& b) {
  const onnx::NodeProto* div = b.producer(0);
  const onnx::NodeProto* add = b.sole_consumer(0);
  const onnx::NodeProto* mul = add ? b.sole_consumer_of(*add, 0) : nullptr;
  const onnx::NodeProto* half = mul ? b.sole_consumer_of(*mul, 0) : nullptr;
  const std::string x = div && div->op_type() == "Div" && div->input_size() == 2 ? div->input(0) : "";
  const bool gelu = !x.empty() && add && mul && half && near(b.constant_named(div->input(1)), std::sqrt(2.0)) && add->op_type() == "Add" &&
                    near(other_constant(b, *add, b.node().output(0)), 1.0) && mul->op_type() == "Mul" &&
                    (mul->input(0) == x || mul->input(1) == x) && half->op_type() == "Mul" &&
                    near(other_constant(b, *half, mul->output(0)), 0.5);
  if (!gelu) {
    read_unary(b, row("Erf"));
    return;
  }
  const Value y = b.call("aten::gelu", {Argument(b.node_of(b.value_named(x))), Argument(c10::IValue(std::string("none")))});
  b.absorb(*add, y);
  b.absorb(*mul, y);
  b.absorb(*half, y);
  b.bind(0, y);
}

// Softplus inside Mish as exporters below opset 18 write it, Mul(x, Tanh(Softplus(x))),
// is read as aten::mish(x): one quantized op, as PyTorch has it. Any other Softplus is
// aten::softplus.
void softplus(Builder& b) {
  const std::string& x = b.node().input(0);
  const onnx::NodeProto* tanh = b.sole_consumer(0);
  const onnx::NodeProto* mul = tanh && tanh->op_type() == "Tanh" ? b.sole_consumer_of(*tanh, 0) : nullptr;
  const bool mish = mul && mul->op_type() == "Mul" && mul->input_size() == 2 &&
                    ((mul->input(0) == x && mul->input(1) == tanh->output(0)) || (mul->input(1) == x && mul->input(0) == tanh->output(0)));
  if (!mish) {
    read_unary(b, row("Softplus"));
    return;
  }
  const Value y = b.call("aten::mish", {Argument(b.tensor(0))});
  b.absorb(*tanh, y);
  b.absorb(*mul, y);
  b.bind(0, y);
}

void gelu(Builder& b) {
  b.bind(0, b.call("aten::gelu", {Argument(b.tensor(0)), Argument(c10::IValue(attr_s(b.node(), "approximate", "none")))}));
}

Converter softmax(const char* op) {
  return [op](Builder& b) {
    const int64_t axis = attr_i(b.node(), "axis", b.opset() >= 13 ? -1 : 1);
    if (b.opset() < 13 && axis != b.rank(0) - 1) b.fail("Softmax over a flattened axis (opset < 13) is not supported");
    b.bind(0, b.call(op, {Argument(b.tensor(0)), Argument(c10::IValue(axis)), Argument()}));
  };
}

void cast(Builder& b) {
  const auto dtype = scalar_type(attr_i(b.node(), "to", 1));
  if (!dtype) b.fail("cast to ONNX type " + std::to_string(attr_i(b.node(), "to", 1)) + " is not supported");
  if (!b.in(0).sym.empty()) {  // a shape stays a shape
    b.forward_input(0, 0);
    return;
  }
  b.bind(0, b.call("aten::to.dtype", {Argument(b.tensor(0)), Argument(c10::IValue(static_cast<int64_t>(*dtype))), Argument(c10::IValue(false)),
                                      Argument(c10::IValue(false)), Argument()}));
}

void constant(Builder& b) {
  const auto& n = b.node();
  at::Tensor t = b.attr_tensor("value");
  if (!t.defined()) {
    if (const auto* a = attribute(n, "value_float")) t = at::scalar_tensor(a->f(), at::kFloat);
    else if (const auto* a = attribute(n, "value_int")) t = at::scalar_tensor(a->i(), at::kLong);
    else if (const auto* a = attribute(n, "value_floats")) t = at::tensor(std::vector<float>(a->floats().begin(), a->floats().end()));
    else if (const auto* a = attribute(n, "value_ints")) t = at::tensor(std::vector<int64_t>(a->ints().begin(), a->ints().end()));
    else b.fail("a Constant without a tensor, float or int value (sparse and string constants are not supported)");
  }
  b.bind(0, Builder::constant_value(t));
}

// The axes of a Reduce* node (attribute before opset 18, input 1 from 18; ReduceSum from 13).
std::vector<int64_t> reduce_axes(Builder& b, bool input_from_13) {
  const bool as_input = b.opset() >= 18 || (input_from_13 && b.opset() >= 13);
  std::vector<int64_t> axes;
  if (as_input && b.has_input(1)) {
    const at::Tensor c = b.constant(1, "axes").to(at::kLong).contiguous().reshape({-1});
    axes.assign(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  } else if (!as_input) {
    axes = attr_ints(b.node(), "axes");
  }
  const int64_t r = b.rank(0);
  if (axes.empty() && !attr_i(b.node(), "noop_with_empty_axes", 0))
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  for (auto& a : axes) a = a < 0 ? a + r : a;
  std::sort(axes.begin(), axes.end());
  return axes;
}

Converter reduce(const char* op, bool input_from_13) {
  return [op, input_from_13](Builder& b) {
    const std::vector<int64_t> axes = reduce_axes(b, input_from_13);
    const bool keep = attr_i(b.node(), "keepdims", 1) != 0;
    const int64_t r = b.rank(0);
    Node* x = b.tensor(0);
    if (axes.empty()) {
      b.forward_input(0, 0);
      return;
    }
    const bool spatial = keep && ((r == 4 && axes == std::vector<int64_t>{2, 3}) || (r == 3 && axes == std::vector<int64_t>{2}));
    if (std::string(op) == "aten::mean.dim" && spatial) {  // global average pooling, as torch.nn gives it
      const std::string pool = r == 4 ? "aten::adaptive_avg_pool2d" : "aten::adaptive_avg_pool1d";
      b.bind(0, b.call(pool, {Argument(x), Argument(c10::IValue(std::vector<int64_t>(static_cast<size_t>(r - 2), 1)))}));
      return;
    }
    std::vector<Argument> args = {Argument(x), Argument(c10::IValue(axes)), Argument(c10::IValue(keep))};
    if (std::string(op) != "aten::amax" && std::string(op) != "aten::amin") args.emplace_back();  // dtype
    b.bind(0, b.call(op, std::move(args)));
  };
}

// Where over shape elements picks by a constant condition; over tensors it is aten::where.
void where(Builder& b) {
  if (!b.in(0).sym.empty() || !b.in(1).sym.empty() || !b.in(2).sym.empty()) {
    auto c = shape_elements(b.in(0)), x = shape_elements(b.in(1)), y = shape_elements(b.in(2));
    if (!c || !x || !y) b.fail("selects between a shape and a tensor computed at run time");
    const size_t n = std::max({c->size(), x->size(), y->size()});
    std::vector<Argument> out;
    for (size_t i = 0; i < n; ++i) {
      const Argument& ci = (*c)[c->size() == 1 ? 0 : i];
      if (ci.kind != Argument::Kind::kConst) b.fail("a condition on dynamic sizes; fix the input shape (model.input_shape)");
      out.push_back(ci.value.toInt() ? (*x)[x->size() == 1 ? 0 : i] : (*y)[y->size() == 1 ? 0 : i]);
    }
    b.bind(0, shape_value(std::move(out), false));
    return;
  }
  b.bind(0, b.call("aten::where.self", {Argument(b.tensor(0)), Argument(b.tensor(1)), Argument(b.tensor(2))}));
}

}  // namespace

void add_elementwise_ops(ConverterTable& t) {
  for (const auto& r : unary_onnx_ops()) t[r.onnx] = unary(r);
  // ONNX Mish (opset 18) is aten::mish; qfx writes mish as Softplus, Tanh and Mul
  // (read back by `softplus`), so it is not a row of the shared table.
  t["Mish"] = [](Builder& b) { b.bind(0, b.call("aten::mish", {Argument(b.tensor(0))})); };
  t["Add"] = binary("add", '+', true);
  t["Sub"] = binary("sub", '-', false);
  t["Mul"] = binary("mul", '*', true);
  t["Div"] = binary("div", '/', false);
  t["Pow"] = pow;
  t["Mod"] = [](Builder& b) {
    if (attr_i(b.node(), "fmod", 0)) b.bind(0, b.call("aten::fmod.Tensor", {Argument(b.tensor(0)), Argument(b.tensor(1))}));
    else binary("remainder", '%', false)(b);
  };
  t["Equal"] = binary("eq", '=', true);
  t["Less"] = binary("lt", 0, false);
  t["Greater"] = binary("gt", 0, false);
  t["LessOrEqual"] = binary("le", 0, false);
  t["GreaterOrEqual"] = binary("ge", 0, false);
  t["And"] = [](Builder& b) { b.bind(0, b.call("aten::logical_and", {Argument(b.tensor(0)), Argument(b.tensor(1))})); };
  t["Or"] = [](Builder& b) { b.bind(0, b.call("aten::logical_or", {Argument(b.tensor(0)), Argument(b.tensor(1))})); };
  t["Where"] = where;
  t["Clip"] = clip;
  t["HardSigmoid"] = hard_sigmoid;
  t["Gelu"] = gelu;
  t["Erf"] = erf;
  t["Softplus"] = softplus;
  t["Softmax"] = softmax("aten::softmax.int");
  t["LogSoftmax"] = softmax("aten::log_softmax.int");
  t["Cast"] = cast;
  t["Constant"] = constant;
  t["Identity"] = [](Builder& b) { b.forward_input(0, 0); };
  t["Dropout"] = [](Builder& b) { b.forward_input(0, 0); };
  t["ReduceMean"] = reduce("aten::mean.dim", false);
  t["ReduceSum"] = reduce("aten::sum.dim_IntList", true);
  t["ReduceMax"] = reduce("aten::amax", false);
  t["ReduceMin"] = reduce("aten::amin", false);
}

}  // namespace qfx::fx::onnx_detail
