// The built-in op schemas (ONNX operator spec's required inputs and input types;
// qfx's int8 forms after QDQ matching, whose Q/DQ scales and zero points became
// qparams) and their registry.
#include "qfx/runtime/op_schema.h"

#include <map>
#include <mutex>
#include <set>

#include "qfx/error.h"

namespace qfx::runtime {
namespace {

struct Schemas {
  std::mutex mu;
  std::map<std::string, OpSchema> by_op;
};

OpSchema schema(const std::string& op, size_t min_inputs, size_t float_inputs, bool integer, bool wide, const std::string& what) {
  OpSchema s;
  s.op = op;
  s.min_inputs = min_inputs;
  s.float_inputs = float_inputs;
  s.integer = integer;
  s.wide_input = wide;
  s.summary = what;
  return s;
}

OpSchema float_op(const std::string& op, size_t min_inputs, size_t float_inputs, const std::string& what) {
  return schema(op, min_inputs, float_inputs, false, false, what);
}

OpSchema integer_op(const std::string& op, size_t min_inputs, bool wide, const std::string& what) {
  return schema(op, min_inputs, 0, true, wide, what);
}

void add_builtins(std::map<std::string, OpSchema>& m) {
  std::vector<OpSchema> v = {
      float_op("Conv", 2, 1, "ONNX Conv"), float_op("ConvTranspose", 2, 1, "ONNX ConvTranspose"),
      float_op("Gemm", 2, 3, "ONNX Gemm (C optional from opset 11)"), float_op("MatMul", 2, 2, "ONNX MatMul"),
      float_op("BatchNormalization", 5, 1, "ONNX BatchNormalization"), float_op("LSTM", 3, 3, "ONNX LSTM"),
      float_op("GRU", 3, 3, "ONNX GRU"), float_op("QuantizeLinear", 1, 1, "ONNX QuantizeLinear"),
      float_op("Softmax", 1, 1, "ONNX Softmax"), float_op("ReduceMean", 1, 1, "ONNX ReduceMean"),
      float_op("ReduceSum", 1, 1, "ONNX ReduceSum"), float_op("GlobalAveragePool", 1, 1, "ONNX GlobalAveragePool"),
      float_op("AveragePool", 1, 1, "ONNX AveragePool"), float_op("Resize", 1, 1, "ONNX Resize"),
      integer_op("QLinearConv", 2, true, "int8 Conv (ONNX QLinearConv, or its QDQ form)"),
      integer_op("QGemm", 2, true, "int8 Gemm (com.microsoft QGemm, or its QDQ form)"),
      integer_op("QLinearMatMul", 2, true, "int8 MatMul (ONNX QLinearMatMul, or its QDQ form)"),
      integer_op("QLinearAdd", 2, false, "int8 Add (com.microsoft QLinearAdd)"),
      integer_op("QLinearMul", 2, false, "int8 Mul (com.microsoft QLinearMul)"),
      integer_op("QLinearGlobalAveragePool", 1, false, "int8 GlobalAveragePool"),
      integer_op("QLinearAveragePool", 1, false, "int8 AveragePool"),
      integer_op("QLinearConcat", 1, false, "int8 Concat with per-input qparams"),
      integer_op("QLut", 1, false, "a float elementwise region between DQ and Q as a 256-entry table"),
      integer_op("QRelu", 1, false, "int8 Relu between DQ and Q"), integer_op("QClip", 1, false, "int8 Clip between DQ and Q"),
      integer_op("QIntGelu", 1, false, "I-BERT's integer GELU"), integer_op("QIntLayerNorm", 1, false, "I-BERT's integer LayerNorm"),
      integer_op("QIntSoftmax", 1, false, "I-BERT's integer Softmax"),
      integer_op("QFlatten", 1, false, "Flatten of int8 codes"),
  };
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And",
                         "Or", "Reshape", "Gather"})
    v.push_back(float_op(op, 2, 0, std::string("ONNX ") + op));
  v.push_back(float_op("Where", 3, 0, "ONNX Where"));
  OpSchema pool = float_op("MaxPool", 1, 0, "ONNX MaxPool, on float32 or on 8-bit codes");
  pool.input0_dtypes = {DType::kFloat32, DType::kUInt8, DType::kInt8};
  v.push_back(pool);
  for (const char* op : {"Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Relu", "Clip", "LeakyRelu", "Exp", "Erf", "Neg", "Abs"})
    v.push_back(float_op(op, 1, 0, std::string("ONNX ") + op));
  v.push_back(float_op("Elu", 1, 1, "ONNX Elu"));
  v.push_back(float_op("Softplus", 1, 1, "ONNX Softplus"));
  for (auto& s : v) {
    static const std::set<std::string> tabulable = {"Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Relu", "Clip", "LeakyRelu",
                                                    "Exp", "Erf", "Neg", "Abs", "Mul", "Add", "Sub", "Div", "Elu",
                                                    "Softplus"};
    static const std::set<std::string> table = {"Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "Exp", "Erf", "Elu"};
    s.tabulable = tabulable.count(s.op) > 0;
    s.table = table.count(s.op) > 0;
    m[s.op] = s;
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

}  // namespace qfx::runtime
