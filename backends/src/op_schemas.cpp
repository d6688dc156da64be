// The built-in op schemas, one record per op (ONNX operator spec's required inputs
// and input types; qfx's int8 forms after QDQ matching, whose Q/DQ scales and zero
// points became qparams), and their registry. Adding an op to the runtime is one
// row here plus its kernels (docs/development.md).
#include "qfx/runtime/op_schema.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "qfx/error.h"

namespace qfx::runtime {
namespace {

struct Schemas {
  std::mutex mu;
  std::map<std::string, OpSchema> by_op;
};

// A record's builder: OpSchema with the chainable setters the table below reads.
struct Op {
  OpSchema s;
  Op(const std::string& op, size_t min_inputs, size_t float_inputs, const std::string& what) {
    s.op = op;
    s.min_inputs = min_inputs;
    s.float_inputs = float_inputs;
    s.summary = what;
  }
  // An integer form: computes on codes, requantizes as `r`.
  Op& integer(Rescale r, bool wide = false) {
    s.integer = true;
    s.rescale = r;
    s.wide_input = wide;
    return *this;
  }
  Op& qdq(const std::string& form, std::vector<int> inputs = {0}) {
    s.qdq_form = form;
    s.qdq_inputs = std::move(inputs);
    return *this;
  }
  Op& moves() { return s.moves_values = true, *this; }
  Op& moves_codes() { return s.moves_values = s.moves_codes = true, *this; }
  Op& bit_exact() { return s.bit_exact = true, *this; }
  Op& tabulable() { return s.tabulable = true, *this; }
  Op& table() { return s.tabulable = s.table = true, *this; }
  Op& finite() { return s.finite_parameters = true, *this; }
  Op& integer_only_of(const std::string& op) { return s.integer_only_of = op, *this; }
  Op& input0(std::vector<DType> d) { return s.input0_dtypes = std::move(d), *this; }
  Op& macs(std::function<int64_t(const MacShapes&)> f) { return s.macs = std::move(f), *this; }
};

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// MACs per output element times outputs (ConvTranspose: per input element).
int64_t conv_macs(const MacShapes& m) { return numel(m.y) * (numel(m.w) / m.w[0]); }
int64_t conv_transpose_macs(const MacShapes& m) { return numel(m.x) * (numel(m.w) / m.w[0]); }
int64_t gemm_macs(const MacShapes& m) { return numel(m.y) * (m.attr_i("transA", 0) != 0 ? m.x[0] : m.x.back()); }
int64_t matmul_macs(const MacShapes& m) { return numel(m.y) * m.x.back(); }

std::string onnx(const std::string& op) { return "ONNX " + op; }

std::vector<Op> float_ops() {
  using D = DType;
  return {
      Op("Conv", 2, 1, onnx("Conv")).qdq("QLinearConv", {0, 1}).finite().macs(conv_macs),
      Op("ConvTranspose", 2, 1, onnx("ConvTranspose")).finite().macs(conv_transpose_macs),
      Op("Gemm", 2, 3, "ONNX Gemm (C optional from opset 11)").qdq("QGemm", {0, 1}).finite().macs(gemm_macs),
      Op("MatMul", 2, 2, onnx("MatMul")).qdq("QLinearMatMul", {0, 1}).finite().macs(matmul_macs),
      Op("MatMulNBits", 3, 1, "MatMul by block-wise 2/4/8-bit constant weights (com.microsoft MatMulNBits, or a block-wise DequantizeLinear + MatMul)").finite().macs(matmul_macs),
      Op("BatchNormalization", 5, 1, onnx("BatchNormalization")).finite(),
      Op("LayerNormalization", 2, 1, "ONNX LayerNormalization (opset 17; float32, or QIntLayerNorm under an integer-only target)").finite(),
      Op("LSTM", 3, 3, onnx("LSTM")), Op("GRU", 3, 3, onnx("GRU")),
      Op("QuantizeLinear", 1, 1, "ONNX QuantizeLinear (per tensor, per axis, per block; to int4, uint4, int8, uint8, int16, uint16)").finite(),
      Op("DequantizeLinear", 2, 0, "ONNX DequantizeLinear (per tensor, per axis, per block; from int4, uint4, int8, uint8, int16, uint16, int32)").finite().bit_exact(),
      Op("Softmax", 1, 1, onnx("Softmax")), Op("LogSoftmax", 1, 1, onnx("LogSoftmax")), Op("ReduceMean", 1, 1, onnx("ReduceMean")),
      Op("ReduceSum", 1, 1, onnx("ReduceSum")), Op("Resize", 1, 1, "ONNX Resize (nearest, linear or cubic, 4-D; opset-18 antialias, axes, keep_aspect_ratio_policy at their defaults)"),
      Op("GlobalAveragePool", 1, 1, onnx("GlobalAveragePool")).qdq("QLinearGlobalAveragePool"),
      Op("AveragePool", 1, 1, onnx("AveragePool")).qdq("QLinearAveragePool"),
      Op("MaxPool", 1, 0, "ONNX MaxPool, on float32 or on 8-bit codes").input0({D::kFloat32, D::kUInt8, D::kInt8}).moves().qdq("MaxPool"),
      Op("Add", 2, 0, onnx("Add")).tabulable().qdq("QLinearAdd", {0, 1}),
      Op("Mul", 2, 0, onnx("Mul")).tabulable().qdq("QLinearMul", {0, 1}),
      Op("Sub", 2, 0, onnx("Sub")).tabulable(), Op("Div", 2, 0, onnx("Div")).tabulable(), Op("Pow", 2, 0, onnx("Pow")),
      Op("Equal", 2, 0, onnx("Equal")), Op("Less", 2, 0, onnx("Less")), Op("Greater", 2, 0, onnx("Greater")),
      Op("LessOrEqual", 2, 0, onnx("LessOrEqual")), Op("GreaterOrEqual", 2, 0, onnx("GreaterOrEqual")),
      Op("And", 2, 0, onnx("And")), Op("Or", 2, 0, onnx("Or")), Op("Where", 3, 0, onnx("Where")),
      Op("Reshape", 2, 0, onnx("Reshape")).moves_codes().qdq("Reshape"),
      Op("Flatten", 1, 0, onnx("Flatten")).moves_codes().qdq("Flatten"),
      Op("Squeeze", 1, 0, onnx("Squeeze")).moves_codes().qdq("Squeeze"),
      Op("Unsqueeze", 2, 0, onnx("Unsqueeze")).moves_codes().qdq("Unsqueeze"),
      Op("Transpose", 1, 0, onnx("Transpose")).moves_codes().qdq("Transpose"),
      Op("Slice", 3, 0, onnx("Slice")).moves_codes(),
      Op("Identity", 1, 0, onnx("Identity")).moves(), Op("Concat", 1, 0, onnx("Concat")).moves().qdq("QLinearConcat", {-1}),
      Op("Gather", 2, 0, onnx("Gather")).moves(), Op("Expand", 2, 0, onnx("Expand")).moves(),
      Op("Relu", 1, 0, onnx("Relu")).tabulable().qdq("QRelu"), Op("Clip", 1, 0, onnx("Clip")).tabulable().qdq("QClip"),
      Op("Sigmoid", 1, 0, onnx("Sigmoid")).table(), Op("Tanh", 1, 0, onnx("Tanh")).table(),
      Op("HardSigmoid", 1, 0, onnx("HardSigmoid")).table(), Op("HardSwish", 1, 0, onnx("HardSwish")).table(),
      Op("Exp", 1, 0, onnx("Exp")).table(), Op("Erf", 1, 0, onnx("Erf")).table(), Op("Elu", 1, 1, onnx("Elu")).table(),
      Op("LeakyRelu", 1, 0, onnx("LeakyRelu")).tabulable(), Op("Neg", 1, 0, onnx("Neg")).tabulable(),
      Op("Abs", 1, 0, onnx("Abs")).tabulable(), Op("Softplus", 1, 1, onnx("Softplus")).table(),
      Op("Gelu", 1, 0, "ONNX Gelu (opset 20; approximate none or tanh)"), Op("Sqrt", 1, 0, onnx("Sqrt")),
      Op("Log", 1, 0, onnx("Log")), Op("Reciprocal", 1, 0, onnx("Reciprocal")), Op("Floor", 1, 0, onnx("Floor")),
      Op("Ceil", 1, 0, onnx("Ceil")), Op("Sin", 1, 0, onnx("Sin")), Op("Cos", 1, 0, onnx("Cos")),
      Op("Sign", 1, 0, onnx("Sign")), Op("Not", 1, 0, onnx("Not")), Op("Cast", 1, 0, onnx("Cast")),
      Op("Pad", 2, 0, "ONNX Pad (constant, reflect and edge modes)"),
      Op("Mod", 2, 0, onnx("Mod")), Op("Min", 1, 0, onnx("Min")), Op("Max", 1, 0, onnx("Max")),
      Op("BitwiseAnd", 2, 0, onnx("BitwiseAnd")), Op("BitwiseOr", 2, 0, onnx("BitwiseOr")),
      Op("BitwiseXor", 2, 0, onnx("BitwiseXor")), Op("BitwiseNot", 1, 0, onnx("BitwiseNot")), Op("Xor", 2, 0, onnx("Xor")),
      Op("ReduceMax", 1, 0, onnx("ReduceMax")), Op("ReduceMin", 1, 0, onnx("ReduceMin")), Op("ReduceProd", 1, 0, onnx("ReduceProd")),
      Op("ArgMax", 1, 0, onnx("ArgMax")), Op("ArgMin", 1, 0, onnx("ArgMin")), Op("CumSum", 2, 0, onnx("CumSum")),
      Op("TopK", 2, 0, onnx("TopK")), Op("GatherElements", 2, 0, onnx("GatherElements")).moves(),
      Op("GatherND", 2, 0, "ONNX GatherND (batch_dims 0)").moves(), Op("ScatterND", 3, 0, "ONNX ScatterND (reduction none, add, max, min)"),
      Op("ScatterElements", 3, 0, "ONNX ScatterElements (reduction none, add, max, min)"), Op("Range", 3, 0, onnx("Range")),
      Op("ConstantOfShape", 1, 0, onnx("ConstantOfShape")), Op("Tile", 2, 0, onnx("Tile")).moves(),
      Op("Split", 1, 0, onnx("Split")).moves(), Op("Round", 1, 0, "ONNX Round (half to even)"), Op("Tan", 1, 0, onnx("Tan")),
      Op("Asin", 1, 0, onnx("Asin")), Op("Acos", 1, 0, onnx("Acos")), Op("Atan", 1, 0, onnx("Atan")),
      Op("Sinh", 1, 0, onnx("Sinh")), Op("Cosh", 1, 0, onnx("Cosh")), Op("Asinh", 1, 0, onnx("Asinh")),
      Op("Acosh", 1, 0, onnx("Acosh")), Op("Atanh", 1, 0, onnx("Atanh")), Op("IsNaN", 1, 0, onnx("IsNaN")),
      Op("IsInf", 1, 0, onnx("IsInf")),
  };
}

std::vector<Op> integer_forms() {
  using R = Rescale;
  return {
      Op("QLinearConv", 2, 0, "int8 Conv (ONNX QLinearConv, or its QDQ form)").integer(R::kAccumulator, true).finite().macs(conv_macs),
      Op("QGemm", 2, 0, "int8 Gemm (com.microsoft QGemm, or its QDQ form)").integer(R::kAccumulator, true).macs(gemm_macs),
      Op("QLinearMatMul", 2, 0, "int8 MatMul (ONNX QLinearMatMul, or its QDQ form)").integer(R::kAccumulator, true).finite().macs(matmul_macs),
      Op("QLinearAdd", 2, 0, "int8 Add (com.microsoft QLinearAdd)").integer(R::kElementwise),
      Op("QLinearMul", 2, 0, "int8 Mul (com.microsoft QLinearMul)").integer(R::kElementwise),
      Op("QLinearGlobalAveragePool", 1, 0, "int8 GlobalAveragePool").integer(R::kWindowAverage),
      Op("QLinearAveragePool", 1, 0, "int8 AveragePool").integer(R::kWindowAverage),
      Op("QLinearConcat", 1, 0, "int8 Concat with per-input qparams").integer(R::kPerInput),
      Op("QRelu", 1, 0, "int8 Relu between DQ and Q").integer(R::kPerInput),
      Op("QClip", 1, 0, "int8 Clip between DQ and Q").integer(R::kPerInput),
      Op("QLut", 1, 0, "a float elementwise region between DQ and Q as a 256-entry table").integer(R::kTable),
      Op("QIntGelu", 1, 0, "I-BERT's integer GELU").integer(R::kIntegerOnly).integer_only_of("Gelu"),
      Op("QIntLayerNorm", 1, 0, "I-BERT's integer LayerNorm").integer(R::kIntegerOnly).integer_only_of("LayerNormalization"),
      Op("QIntSoftmax", 1, 0, "I-BERT's integer Softmax").integer(R::kIntegerOnly).integer_only_of("Softmax"),
      Op("QLinearSoftmax", 1, 0, "int8 Softmax as TFLite's reference kernel computes it").integer(R::kSoftmax),
  };
}

void add_builtins(std::map<std::string, OpSchema>& m) {
  for (auto* table : {float_ops, integer_forms})
    for (Op& o : table()) {
      if (o.s.moves_values) o.s.bit_exact = true;
      m[o.s.op] = std::move(o.s);
    }
}

Schemas& schemas() {
  static Schemas* s = [] {
    auto* r = new Schemas;
    add_builtins(r->by_op);
    return r;
  }();
  return *s;
}

}  // namespace

void register_op_schema(const OpSchema& s) {
  if (s.op.empty()) throw ArgumentError("register_op_schema: empty op");
  Schemas& r = schemas();
  std::lock_guard<std::mutex> lk(r.mu);
  r.by_op[s.op] = s;
}

const OpSchema* find_op_schema(const std::string& op) {
  Schemas& r = schemas();
  std::lock_guard<std::mutex> lk(r.mu);
  auto it = r.by_op.find(op);
  return it == r.by_op.end() ? nullptr : &it->second;  // entries are never erased
}

std::vector<OpSchema> op_schemas() {
  Schemas& r = schemas();
  std::lock_guard<std::mutex> lk(r.mu);
  std::vector<OpSchema> out;
  for (const auto& kv : r.by_op) out.push_back(kv.second);
  return out;
}

std::vector<std::string> lut_op_types() {
  std::vector<std::string> ops;
  for (const auto& s : op_schemas())
    if (s.table) ops.push_back(s.op);
  return ops;
}

std::vector<std::string> integer_only_op_types() {
  std::vector<std::string> ops;
  for (const auto& s : op_schemas())
    if (!s.integer_only_of.empty()) ops.push_back(s.integer_only_of);
  std::sort(ops.begin(), ops.end());
  return ops;
}

}  // namespace qfx::runtime
