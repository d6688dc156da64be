// The op catalog's elementwise ops: add / sub / mul / div (also between sizes),
// comparisons and logic, where, pow, rsub, clamp / hardtanh,
// log_softmax and dtype casts (what a float ONNX model's graph carries between its
// quantized groups).
#include "exporter.h"
#include "export_shape.h"
#include "op_families.h"

#include <cmath>

namespace qfx::quant::detail {
namespace {

// ONNX TensorProto element type of a c10::ScalarType code; -1 for others.
int onnx_type(int64_t scalar_type) {
  switch (static_cast<c10::ScalarType>(scalar_type)) {
    case c10::ScalarType::Float: return onnx::TensorProto::FLOAT;
    case c10::ScalarType::Double: return onnx::TensorProto::DOUBLE;
    case c10::ScalarType::Half: return onnx::TensorProto::FLOAT16;
    case c10::ScalarType::Long: return onnx::TensorProto::INT64;
    case c10::ScalarType::Int: return onnx::TensorProto::INT32;
    case c10::ScalarType::Short: return onnx::TensorProto::INT16;
    case c10::ScalarType::Char: return onnx::TensorProto::INT8;
    case c10::ScalarType::Byte: return onnx::TensorProto::UINT8;
    case c10::ScalarType::Bool: return onnx::TensorProto::BOOL;
    default: return -1;
  }
}

// The value of node `n` is `y`; its rank the largest of its tensor arguments'.
void finish(Exporter& e, fx::Node& n, const std::string& y) {
  e.names_[&n] = y;
  int r = e.rank_of(n.args().at(0));
  for (const auto& a : n.args())
    if (a.is_node()) r = std::max(r, e.rank_of(a));
  e.rank_[&n] = r;
}

void rsub(Exporter& e, fx::Node& n) {  // other - self (alpha 1)
  const std::string y = e.fresh(n.name());
  if (n.args().size() > 2 && e.num_arg(n, 2, 1.0) != 1.0) unsupported(n, "alpha != 1");
  e.last_ = e.node("Sub", {e.operand(n, n.args().at(1)), e.operand(n, n.args().at(0))}, y, n.name());
  finish(e, n, y);
}

void where(Exporter& e, fx::Node& n) {
  const at::ScalarType t = e.promoted(n, 1, 3);
  const std::string c = e.operand_as(n, n.args().at(0), at::kBool);
  const std::string a = e.operand_as(n, n.args().at(1), t), b = e.operand_as(n, n.args().at(2), t);
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("Where", {c, a, b}, y, n.name());
  finish(e, n, y);
}

// A keyword argument of `n` that is a string ("rounding_mode"), "" when absent or None.
std::string string_kwarg(const fx::Node& n, const char* key) {
  for (const auto& [k, a] : n.kwargs())
    if (k == key && a.is_const() && a.value.isString()) return a.value.toStringRef();
  return "";
}

// ONNX Mod of a and b (fmod 1: C's fmod, the sign of a; 0: Python's, the sign of b).
std::string mod(Exporter& e, const fx::Node& n, const std::string& a, const std::string& b, int fmod, const std::string& name) {
  const std::string y = e.fresh(name);
  e.attr_i(e.node("Mod", {a, b}, y, name), "fmod", fmod);
  return y;
}

// div with rounding_mode: "trunc" and "floor" (torch.div's), else true division.
// Integers: ONNX Div truncates; floor is (a - a mod b) / b, exact. Floats: the
// quotient's floor, or the quotient less its fmod by 1 (truncation).
void div(Exporter& e, fx::Node& n) {
  if (int_operands(e, n)) unsupported(n, "true division of sizes has no ONNX export in qfx yet");
  const std::string mode = string_kwarg(n, "rounding_mode");
  if (mode.empty()) return e.binary(&n, "Div");
  const at::ScalarType t = e.promoted(n, 0, 2);
  const std::string a = e.operand_as(n, n.args().at(0), t), b = e.operand_as(n, n.args().at(1), t);
  std::string y;
  if (at::isIntegralType(t, true))
    y = mode == "trunc" ? e.two_input("Div", a, b, n.name())
                        : e.two_input("Div", e.two_input("Sub", a, mod(e, n, a, b, 0, n.name() + "_mod"), n.name() + "_sub"), b, n.name());
  else if (mode == "floor")
    y = e.fresh(n.name()), e.node("Floor", {e.two_input("Div", a, b, n.name() + "_div")}, y, n.name());
  else {
    const std::string q = e.two_input("Div", a, b, n.name() + "_div");
    y = e.two_input("Sub", q, mod(e, n, q, e.init("one", at::full({}, 1.0f)), 1, n.name() + "_frac"), n.name());
  }
  finish(e, n, y);
}

// fmod (C's: the sign of x) as ONNX Mod(fmod=1); remainder (Python's: the sign of y)
// as Mod(fmod=0) on integers and x - floor(x / y) * y on floats (ONNX Mod takes
// fmod=0 only on integers).
std::function<void(Exporter&, fx::Node&)> modulo(bool python) {
  return [python](Exporter& e, fx::Node& n) {
    const at::ScalarType t = e.promoted(n, 0, 2);
    const std::string a = e.operand_as(n, n.args().at(0), t), b = e.operand_as(n, n.args().at(1), t);
    std::string y;
    if (!python || at::isIntegralType(t, true)) {
      y = mod(e, n, a, b, python ? 0 : 1, n.name());
    } else {
      const std::string f = e.fresh(n.name() + "_floor");
      e.node("Floor", {e.two_input("Div", a, b, n.name() + "_div")}, f, f);
      y = e.two_input("Sub", a, e.two_input("Mul", f, b, n.name() + "_mul"), n.name());
    }
    finish(e, n, y);
  };
}

// minimum / maximum: ONNX Min / Max in the promoted type.
std::function<void(Exporter&, fx::Node&)> extremum(std::string onnx) {
  return [onnx](Exporter& e, fx::Node& n) {
    const at::ScalarType t = e.promoted(n, 0, 2);
    const std::string a = e.operand_as(n, n.args().at(0), t), b = e.operand_as(n, n.args().at(1), t);
    finish(e, n, e.two_input(onnx.c_str(), a, b, n.name()));
  };
}

// masked_fill(x, mask, value) (.Scalar, or .Tensor with a 0-d value): ONNX
// Where(mask, value, x).
void masked_fill(Exporter& e, fx::Node& n) {
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("Where", {e.value(n, n.args().at(1)), e.operand(n, n.args().at(2)), e.value(n, n.args().at(0))}, y, n.name());
  finish(e, n, y);
}

void clamp(Exporter& e, fx::Node& n) {  // clamp / hardtanh (min, max): Clip with the bounds given
  const std::optional<at::ScalarType> t = e.dtype_of(n.args().at(0));
  const bool tensors = (n.args().size() > 1 && n.args()[1].is_node()) || (n.args().size() > 2 && n.args()[2].is_node());
  if (tensors || (t && *t != at::kFloat)) {  // Max(x, min), then Min(., max), in x's type
    std::string y = e.value(n, n.args().at(0));
    const at::ScalarType x = t.value_or(at::kFloat);
    for (size_t i = 1; i < 3 && i < n.args().size(); ++i)
      if (!(n.args()[i].is_const() && n.args()[i].value.isNone()))
        y = e.two_input(i == 1 ? "Max" : "Min", y, e.operand_as(n, n.args()[i], x), n.name() + (i == 1 ? "_min" : ""));
    return finish(e, n, y);
  }
  const std::string y = e.fresh(n.name());
  std::vector<std::string> in = {e.value(n, n.args().at(0))};
  for (size_t i = 1; i < 3; ++i) {
    const bool given = i < n.args().size() && n.args()[i].is_const() && (n.args()[i].value.isDouble() || n.args()[i].value.isInt());
    in.push_back(given ? e.init(i == 1 ? "min" : "max", at::full({}, static_cast<float>(e.num_arg(n, i, 0.0)))) : std::string());
  }
  while (!in.empty() && in.back().empty()) in.pop_back();
  e.last_ = e.node("Clip", in, y, n.name());
  finish(e, n, y);
}

void log_softmax(Exporter& e, fx::Node& n) {
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("LogSoftmax", {e.value(n, n.args().at(0))}, y, n.name());
  e.attr_i(e.last_, "axis", e.ints_arg(n, 1).at(0));
  finish(e, n, y);
}

// The dtype a cast names: `to.dtype(x, dtype)`'s second argument, `to.device(x,
// device, dtype)`'s third, or the `dtype=` keyword (`_to_copy`, `to.dtype_layout`);
// nullptr when it names none.
const c10::IValue* cast_dtype(const fx::Node& n) {
  const std::string& t = n.target();
  const size_t i = t.size() > 7 && t.compare(t.size() - 7, 7, ".device") == 0 ? 2 : 1;
  if (n.args().size() > i && n.args()[i].is_const() && n.args()[i].value.isInt()) return &n.args()[i].value;
  for (const auto& [k, a] : n.kwargs())
    if (k == "dtype" && a.is_const() && a.value.isInt()) return &a.value;
  return nullptr;
}

// to / _to_copy naming a dtype, `to.other` / `type_as` (the dtype of another tensor, as
// the program recorded it): ONNX Cast (to the dtype x has: the identity). One naming
// only a device, layout or memory format is the identity.
void cast(Exporter& e, fx::Node& n) {
  const c10::IValue* dtype = cast_dtype(n);
  const bool to_other = n.args().size() > 1 && n.args()[1].is_node();
  if (!dtype && !to_other) return e.alias(&n);
  std::optional<int64_t> code;
  if (dtype) code = dtype->toInt();
  else if (const auto other = e.dtype_of(n.args()[1])) code = static_cast<int64_t>(*other);
  if (!code) unsupported(n, "a cast to the dtype of a tensor whose dtype the program does not record");
  const int t = onnx_type(*code);
  if (t < 0) unsupported(n, "a cast to a dtype ONNX lacks");
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("Cast", {e.value(n, n.args().at(0))}, y, n.name());
  e.attr_i(e.last_, "to", t);
  finish(e, n, y);
}

// bitwise_not / bitwise_and / bitwise_or / bitwise_xor of bool tensors (the masks
// transformers build): ONNX Not / And / Or / Xor. Integer operands need opset 18's
// Bitwise* ops.
std::function<void(Exporter&, fx::Node&)> boolean(std::string onnx) {
  return [onnx](Exporter& e, fx::Node& n) {
    const size_t arity = onnx == "Not" ? 1 : 2;
    for (size_t i = 0; i < arity; ++i)
      if (const auto t = e.dtype_of(n.args().at(i)); t != at::kBool)
        unsupported(n, canonical_op_name(n, e.gm_) + " of a " + (t ? std::string(c10::toString(*t)) + " tensor" : "tensor of unknown dtype") +
                           " (qfx exports it on bool tensors, as ONNX " + onnx + ")");
    if (arity == 1) return e.unary(&n, onnx);
    e.binary(&n, onnx);
  };
}

// ONNX `op` applied to the value already written for n (a two-op composite's second
// op), its node named n's name + `suffix`.
void then(Exporter& e, fx::Node& n, const char* op, const char* suffix) {
  const std::string y = e.fresh(n.name());
  e.last_ = e.node(op, {e.names_.at(&n)}, y, n.name() + suffix);
  finish(e, n, y);
}

// rsqrt: ONNX Sqrt, then Reciprocal (RMSNorm's 1 / sqrt(mean(x^2) + eps)).
void rsqrt(Exporter& e, fx::Node& n) {
  e.unary(&n, "Sqrt");
  then(e, n, "Reciprocal", "_reciprocal");
}

// ne: ONNX Equal, then Not.
void not_equal(Exporter& e, fx::Node& n) {
  e.binary(&n, "Equal");
  then(e, n, "Not", "_not");
}

// add / sub / mul: size arithmetic between ints, else the ONNX op.
std::function<void(Exporter&, fx::Node&)> arithmetic(std::string name, std::string onnx) {
  return [name, onnx](Exporter& e, fx::Node& n) {
    if (int_operands(e, n)) return int_arith(e, &n, name);
    e.binary(&n, onnx);
  };
}

// A function of x written as ONNX ops (expm1, log1p, log2, log10, trunc).
void composite(Exporter& e, fx::Node& n, const std::string& op) {
  const std::string x = e.value(n, n.args().at(0)), b = n.name();
  auto num = [&](const char* hint, double v) { return e.init(hint, at::full({}, static_cast<float>(v))); };
  auto one = [&](const std::string& o, const std::string& in) {
    const std::string y = e.fresh(b + "_" + o);
    e.node(o, {in}, y, y);
    return y;
  };
  std::string y;
  if (op == "expm1") y = e.two_input("Sub", one("Exp", x), num("one", 1.0), b);
  else if (op == "log1p") y = one("Log", e.two_input("Add", x, num("one", 1.0), b + "_plus_one"));
  else if (op == "log2") y = e.two_input("Div", one("Log", x), num("ln2", std::log(2.0)), b);
  else if (op == "log10") y = e.two_input("Div", one("Log", x), num("ln10", std::log(10.0)), b);
  else y = e.two_input("Sub", x, mod(e, n, x, num("one", 1.0), 1, b + "_frac"), b);  // trunc
  finish(e, n, y);
}

}  // namespace

void register_elementwise_ops(OpCatalog& c) {
  static const std::vector<std::pair<const char*, const char*>> arithmetics = {{"add", "Add"}, {"sub", "Sub"}, {"mul", "Mul"}};
  for (const auto& [op, onnx] : arithmetics)
    c.add(OpRecord(op).quantized_as(activation_kinds()).describe("elementwise " + std::string(op) + " (ONNX " + onnx + ")")
              .fuses_as(std::string(op) == "add" || std::string(op) == "mul" ? FusionRole::kElementwiseHead : FusionRole::kNone)
              .reads_kwargs({"alpha"}).writes({onnx, "Mul"}).to_onnx(arithmetic(op, onnx)));
  c.add(OpRecord("div").quantized_as(activation_kinds()).describe("elementwise div (ONNX Div; rounding modes trunc and floor)")
            .reads_kwargs({"rounding_mode"}).writes({"Div", "Floor", "Mod", "Sub"}).to_onnx(div));
  c.add(OpRecord("fmod").describe("C's remainder, the sign of x (ONNX Mod, fmod 1)").writes({"Mod"}).to_onnx(modulo(false)));
  c.add(OpRecord("remainder").describe("Python's remainder, the sign of y (ONNX Mod; floats as x - floor(x / y) * y)")
            .writes({"Mod", "Div", "Floor", "Mul", "Sub"}).to_onnx(modulo(true)));
  c.add(OpRecord("minimum").describe("elementwise minimum (ONNX Min)").writes({"Min"}).to_onnx(extremum("Min")));
  c.add(OpRecord("maximum").describe("elementwise maximum (ONNX Max)").writes({"Max"}).to_onnx(extremum("Max")));
  c.add(OpRecord("logical_xor").describe("ONNX Xor of bool values").writes({"Xor"}).to_onnx([](Exporter& e, fx::Node& n) { e.binary(&n, "Xor"); }));
  static const std::vector<std::pair<const char*, const char*>> composites = {
      {"expm1", "exp(x) - 1 (ONNX Exp, Sub)"}, {"log1p", "log(1 + x) (ONNX Add, Log)"}, {"log2", "log(x) / ln 2 (ONNX Log, Div)"},
      {"log10", "log(x) / ln 10 (ONNX Log, Div)"}, {"trunc", "round toward zero: x - fmod(x, 1) (ONNX Mod, Sub)"}};
  for (const auto& [op, what] : composites)
    c.add(OpRecord(op).describe(what).writes({"Exp", "Sub", "Add", "Log", "Div", "Mod"}).to_onnx([o = std::string(op)](Exporter& e, fx::Node& n) {
      composite(e, n, o);
    }));
  for (const char* op : {"floordiv", "floor_divide"})
    c.add(OpRecord(op).describe("integer floor division of sizes").to_onnx([](Exporter& e, fx::Node& n) {
      if (!int_operands(e, n)) unsupported(n, "op '" + canonical_op_name(n, e.gm_) + "' has no ONNX export in qfx yet");
      int_arith(e, &n, "floordiv");
    }));
  static const std::vector<std::pair<const char*, const char*>> binaries = {
      {"eq", "Equal"},  {"lt", "Less"},   {"gt", "Greater"}, {"le", "LessOrEqual"}, {"ge", "GreaterOrEqual"},
      {"logical_and", "And"}, {"logical_or", "Or"}, {"pow", "Pow"}};
  for (const auto& [op, onnx] : binaries)
    c.add(OpRecord(op).describe(std::string("ONNX ") + onnx + " in float").writes({onnx}).to_onnx([o = std::string(onnx)](Exporter& e, fx::Node& n) {
      e.binary(&n, o);
    }));
  for (const auto& [op, onnx] :
       std::vector<std::pair<const char*, const char*>>{{"bitwise_not", "Not"}, {"bitwise_and", "And"}, {"bitwise_or", "Or"}, {"bitwise_xor", "Xor"}}) {
    OpRecord r(op);
    if (std::string(op) != "bitwise_not")
      r.also_aten({std::string(op) == "bitwise_and" ? "__and__" : std::string(op) == "bitwise_or" ? "__or__" : "__xor__"});
    c.add(r.describe(std::string("ONNX ") + onnx + " of bool tensors").writes({onnx}).to_onnx(boolean(onnx)));
  }
  c.add(OpRecord("masked_fill").describe("ONNX Where(mask, value, x)").writes({"Where"}).to_onnx(masked_fill));
  c.add(OpRecord("rsqrt").describe("1 / sqrt(x) (ONNX Sqrt, then Reciprocal)").writes({"Sqrt", "Reciprocal"}).to_onnx(rsqrt));
  c.add(OpRecord("ne").describe("ONNX Equal, then Not").writes({"Equal", "Not"}).to_onnx(not_equal));
  c.add(OpRecord("rsub").describe("other - self (ONNX Sub)").writes({"Sub"}).to_onnx(rsub));
  c.add(OpRecord("where").describe("ONNX Where").writes({"Where"}).to_onnx(where));
  c.add(OpRecord("clamp").also_aten({"clamp_min", "clamp_max"}).quantized_as(activation_kinds())
            .describe("ONNX Clip with the bounds given (tensor bounds, integers: Max, Min)").writes({"Clip", "Max", "Min"}).to_onnx(clamp));
  c.add(OpRecord("hardtanh").quantized_as(activation_kinds()).describe("ONNX Clip (hardtanh(0, 6) is relu6)").writes({"Clip", "Max", "Min"})
            .to_onnx(clamp));
  c.add(OpRecord("log_softmax").also_aten({"_log_softmax"}).describe("ONNX LogSoftmax").writes({"LogSoftmax"}).to_onnx(log_softmax));
  c.add(OpRecord("to").also_aten({"_to_copy", "type_as"}).reads_kwargs({"dtype"}).describe("a dtype cast (ONNX Cast)").writes({"Cast"}).to_onnx(cast));
}

}  // namespace qfx::quant::detail
