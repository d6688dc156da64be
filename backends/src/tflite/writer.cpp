// ONNX (QDQ, int8) -> TFLite: loads and QDQ-matches the model as the runtime does,
// then writes every int8 op as TFLite's builtin (ops.cpp), 4-D activations NHWC.
#include "writer.h"

#include <cstring>

#include "qfx/atomic_file.h"
#include "qfx/error.h"
#include "qfx_tflite_schema.h"

namespace qfx::runtime::tflite {

namespace s = qfx::tflite_schema;

std::vector<int32_t> tfl_shape(const std::vector<int64_t>& shape, bool nhwc) {
  std::vector<int32_t> out(shape.begin(), shape.end());
  if (nhwc && shape.size() == 4) out = {out[0], out[2], out[3], out[1]};
  return out;
}

namespace {

int64_t tensor_type(DType d) {
  switch (d) {
    case DType::kInt8: return s::TensorType::INT8;
    case DType::kInt32: return s::TensorType::INT32;
    case DType::kFloat32: return s::TensorType::FLOAT32;
    case DType::kUInt8: return s::TensorType::UINT8;
    case DType::kInt16: return s::TensorType::INT16;
    case DType::kInt64: return s::TensorType::INT64;
    default: return s::TensorType::BOOL;
  }
}

// An initializer's bytes, 4-D ones permuted from NCHW to NHWC.
std::string constant_bytes(const Tensor& t, bool nhwc) {
  const size_t es = dtype_size(t.dtype());
  std::string out(t.nbytes(), '\0');
  const auto* src = static_cast<const char*>(t.raw());
  if (!nhwc || t.shape().size() != 4) {
    std::memcpy(out.data(), src, out.size());
    return out;
  }
  const int64_t N = t.shape()[0], C = t.shape()[1], H = t.shape()[2], W = t.shape()[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t x = 0; x < W; ++x)
          std::memcpy(out.data() + ((((n * H + h) * W + x) * C + c) * es), src + ((((n * C + c) * H + h) * W + x) * es), es);
  return out;
}

std::vector<int64_t> zero_points(const ir::QInfo& q) { return {q.zero_point.begin(), q.zero_point.end()}; }

}  // namespace

const Value& Writer::in(const ir::Node& n, const std::string& name, const ir::QInfo* q) {
  if (auto it = values.find(name); it != values.end()) return it->second;
  auto init = g.initializers.find(name);
  if (init == g.initializers.end())
    throw UnsupportedOpError(n.label() + ": input '" + name + "' is computed by an op without a TFLite int8 form");
  const Tensor& t = init->second;
  Value v;
  v.shape = t.shape();
  v.nhwc = t.shape().size() == 4;
  v.quantized = q != nullptr;
  if (q) v.q = *q;
  v.tensor = constant(name, tfl_shape(v.shape, v.nhwc), tensor_type(t.dtype()), constant_bytes(t, v.nhwc),
                      q ? q->scale : std::vector<float>{}, q ? zero_points(*q) : std::vector<int64_t>{});
  return values[name] = v;
}

const Value& Writer::out(const std::string& name, std::vector<int64_t> shape, bool nhwc, int64_t type, const ir::QInfo* q) {
  TensorDef t;
  t.name = name;
  t.shape = tfl_shape(shape, nhwc);
  if (dynamic_batch && !t.shape.empty()) {
    t.signature = t.shape;
    t.signature[0] = -1;
  }
  t.type = type;
  if (q) {
    t.scale = q->scale;
    t.zero_point = zero_points(*q);
  }
  Value v;
  v.tensor = model.add(std::move(t));
  v.shape = std::move(shape);
  v.nhwc = nhwc && v.shape.size() == 4;
  v.quantized = q != nullptr;
  if (q) v.q = *q;
  return values[name] = v;
}

int32_t Writer::constant(const std::string& name, std::vector<int32_t> shape, int64_t type, std::string data,
                         std::vector<float> scale, std::vector<int64_t> zp, int32_t qdim) {
  TensorDef t;
  t.name = name;
  t.shape = std::move(shape);
  t.type = type;
  t.data = std::move(data);
  t.scale = std::move(scale);
  t.zero_point = std::move(zp);
  t.qdim = qdim;
  return model.add(std::move(t));
}

void Writer::op(int64_t code, const std::string& name, std::vector<int32_t> ins, std::vector<int32_t> outs,
                int64_t options_type, OptionsWriter options) {
  OpDef o;
  o.code = code;
  o.name = name;
  o.inputs = std::move(ins);
  o.outputs = std::move(outs);
  o.options_type = options_type;
  o.options = std::move(options);
  model.ops.push_back(std::move(o));
}

namespace {

// A model input: float (QUANTIZE follows, written by the QuantizeLinear) or, with
// int8_io, the codes of the QuantizeLinear that reads it.
void add_inputs(Writer& w) {
  for (const auto& in : w.g.inputs) {
    if (in.dtype != DType::kFloat32)
      throw DataError(w.g.path + ": input '" + in.name + "' is " + dtype_name(in.dtype) + "; the TFLite writer takes float inputs");
    if (!in.shape.empty() && in.shape[0] < 0) w.dynamic_batch = true;
    std::vector<int64_t> shape = in.shape;
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] < 0) {
        if (i != 0)
          throw DataError(w.g.path + ": input '" + in.name + "' has a dynamic dimension " + std::to_string(i) +
                          "; TFLite's tensors here take a dynamic batch only");
        shape[i] = 1;
      }
    w.out(in.name, shape, shape.size() == 4, s::TensorType::FLOAT32, nullptr);
  }
}

bool is_graph_input(const ir::Graph& g, const std::string& v) {
  for (const auto& i : g.inputs)
    if (i.name == v) return true;
  return false;
}

// Writer::outputs: the graph outputs, and the inputs of Identity nodes that write one.
std::set<std::string> output_values(const ir::Graph& g) {
  std::set<std::string> out;
  for (const auto& o : g.outputs) out.insert(o.name);
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it)
    if (it->op == "Identity" && out.count(it->outputs[0])) out.insert(it->inputs[0]);
  return out;
}

// QuantizeLinear / DequantizeLinear at the model's edges.
bool convert_qdq(Writer& w, const ir::Node& n) {
  if (n.op != "QuantizeLinear" && n.op != "DequantizeLinear") return false;
  const bool quant = n.op == "QuantizeLinear";
  std::string why;
  const Tensor* scale = &w.g.initializers.at(n.inputs.at(1));
  const Tensor* zp = n.inputs.size() > 2 && !n.inputs[2].empty() ? &w.g.initializers.at(n.inputs[2]) : nullptr;
  auto q = ir::read_qparams(*scale, zp, DType::kUInt8, n.attr_i("axis", 1), &why);
  if (!q || q->per_channel() || q->dtype != DType::kInt8)
    throw DataError(n.label() + ": TFLite's int8 scheme needs per-tensor int8 activations here" +
                    (q ? std::string(q->dtype != DType::kInt8 ? " (this one is uint8 or int16: convert for the tflite_like target)" : "")
                       : ": " + why));
  const Value x = w.in(n, n.inputs[0]);
  if (quant && w.options.int8_io && is_graph_input(w.g, n.inputs[0])) {
    auto& t = w.model.tensors[static_cast<size_t>(x.tensor)];
    t.type = s::TensorType::INT8;
    t.scale = q->scale;
    t.zero_point = {q->zero_point[0]};
    Value v = x;
    v.quantized = true;
    v.q = *q;
    w.values[n.outputs[0]] = v;
    return true;
  }
  if (!quant && w.options.int8_io && w.outputs.count(n.outputs[0])) {
    w.values[n.outputs[0]] = x;
    return true;
  }
  const Value& y = w.out(n.outputs[0], x.shape, x.nhwc, quant ? s::TensorType::INT8 : s::TensorType::FLOAT32, quant ? &*q : nullptr);
  w.op(quant ? s::BuiltinOperator::QUANTIZE : s::BuiltinOperator::DEQUANTIZE, quant ? "QUANTIZE" : "DEQUANTIZE", {x.tensor},
       {y.tensor});
  return true;
}

}  // namespace

}  // namespace qfx::runtime::tflite

namespace qfx::runtime {

bool tflite_available() { return true; }

TfliteSummary write_tflite(const std::string& onnx_path, const std::string& tflite_path, const TfliteOptions& options) {
  using namespace tflite;
  const std::string what = options.what.empty() ? onnx_path : options.what;
  ir::Graph g = ir::load_onnx(onnx_path);
  ir::simplify(g);
  const std::vector<std::string> fallbacks = ir::fuse_qdq(g);
  Writer w{g, options, false, {}, {}, output_values(g)};
  add_inputs(w);
  for (const auto& n : g.nodes) {
    if (n.op == "Identity") {  // what ir::simplify keeps: an output's name
      w.values[n.outputs[0]] = w.in(n, n.inputs[0]);
      continue;
    }
    if (convert_qdq(w, n) || convert_node(w, n)) continue;
    // An op of the default domain left in the graph runs in float: kept float by the
    // config, or a QDQ group the runtime could not match (its reason).
    std::string why = n.label() + " runs in float in this model";
    for (const auto& f : fallbacks)
      if (f.find("'" + n.name + "'") != std::string::npos) why = f;
    throw UnsupportedOpError(what + ": " + why + "; TFLite's int8 scheme needs every op in int8 (a layer kept float has no TFLite form here)");
  }
  TfliteSummary sum;
  for (const auto& in : g.inputs) {
    w.model.inputs.push_back(w.values.at(in.name).tensor);
    sum.inputs.push_back(in.name);
  }
  for (const auto& o : g.outputs) {
    auto it = w.values.find(o.name);
    if (it == w.values.end()) throw UnsupportedOpError(what + ": output '" + o.name + "' is not computed by any op");
    w.model.outputs.push_back(it->second.tensor);
    sum.outputs.push_back(o.name);
  }
  for (const auto& o : w.model.ops) sum.ops.push_back(o.name);
  write_file_atomic(tflite_path, w.model.serialize("qfx: " + onnx_path.substr(onnx_path.find_last_of('/') + 1)));
  return sum;
}

}  // namespace qfx::runtime
