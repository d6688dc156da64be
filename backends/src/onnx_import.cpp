// ONNX protobuf -> runtime IR.
#include <cmath>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ir.h"
#include "matmul_nbits.h"
#include "onnx_tensor.h"
#include "qfx/error.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/op_schema.h"

namespace qfx::runtime::ir {

int64_t Node::attr_i(const std::string& a, int64_t def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.i;
}
float Node::attr_f(const std::string& a, float def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.f;
}
std::vector<int64_t> Node::attr_ints(const std::string& a, std::vector<int64_t> def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.ints;
}
std::string Node::attr_s(const std::string& a, const std::string& def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.s;
}

namespace {

ValueInfo to_value_info(const onnx::ValueInfoProto& v, const std::string& file) {
  ValueInfo vi;
  vi.name = v.name();
  if (!v.type().has_tensor_type()) throw DataError(file + ": value '" + v.name() + "' is not a tensor");
  const auto& tt = v.type().tensor_type();
  vi.dtype = onnx_dtype(tt.elem_type(), file + ": value '" + v.name() + "'");
  if (tt.has_shape())
    for (const auto& d : tt.shape().dim()) vi.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return vi;
}

}  // namespace

Graph load_onnx(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(path + ": cannot open ONNX model (missing or unreadable)");
  std::stringstream ss;
  ss << f.rdbuf();
  return load_onnx_bytes(ss.str(), path);
}

// ONNX's graph rules, checked before anything plans memory from them: each value is
// written once (graph inputs and initializers by the caller, the rest by exactly one
// node), and read only after it is written (nodes in topological order, as the
// standard requires); graph outputs name written values.
static void validate_assignments(const Graph& g, const std::string& path) {
  std::map<std::string, std::string> writer;  // value -> what defines it
  for (const auto& kv : g.initializers) writer[kv.first] = "an initializer";
  for (const auto& in : g.inputs)
    if (!writer.emplace(in.name, "a graph input").second)
      throw DataError(path + ": graph input '" + in.name + "' is declared twice");
  for (const auto& n : g.nodes) {
    for (const auto& in : n.inputs)
      if (!in.empty() && !writer.count(in))
        throw DataError(path + ": node '" + n.name + "' (" + n.op + ") reads '" + in +
                        "', which no graph input, initializer or earlier node defines");
    for (const auto& out : n.outputs) {
      if (out.empty()) continue;
      auto [it, fresh] = writer.emplace(out, "node '" + n.name + "'");
      if (!fresh)
        throw DataError(path + ": node '" + n.name + "' (" + n.op + ") writes '" + out + "', which " + it->second +
                        " already defines (each ONNX value is assigned once)");
    }
  }
  for (const auto& out : g.outputs)
    if (!writer.count(out.name)) throw DataError(path + ": graph output '" + out.name + "' is not computed by the graph");
}

// The parameters of weighted and normalising ops and the scales of Q/DQ
// (OpSchema::finite_parameters) must be finite: a NaN bias or an infinite weight is named here, at load, instead of
// surfacing as NaN outputs. (Other constants may hold -inf on purpose: additive
// attention masks.)
static void validate_parameters(const Graph& g, const std::string& path) {
  for (const auto& n : g.nodes) {
    const OpSchema* s = find_op_schema(n.op);
    if (!s || !s->finite_parameters) continue;
    for (const auto& in : n.inputs) {
      auto it = g.initializers.find(in);
      if (it == g.initializers.end() || it->second.dtype() != DType::kFloat32) continue;
      const float* p = static_cast<const float*>(it->second.raw());
      for (int64_t i = 0, e = it->second.numel(); i < e; ++i)
        if (!std::isfinite(p[i]))
          throw DataError(path + ": node '" + n.name + "' (" + n.op + ") reads initializer '" + in + "', whose element " +
                          std::to_string(i) + " is " + (std::isnan(p[i]) ? "NaN" : "infinite") +
                          " (weights, biases, normalisation parameters and scales must be finite)");
    }
  }
}

// QuantizeLinear's output type (ONNX opset 21): its `output_dtype` attribute, else
// its zero point's type, else uint8. The runtime stores INT4 / UINT4 / UINT16 in a
// wider dtype (onnx_dtype), so where the zero point alone says one of them the
// loader writes it as `output_dtype`: the kernels saturate to that type's range and
// QDQ matching leaves the node alone. A zero point whose type differs from
// output_dtype is a DataError (the spec requires them equal).
static void annotate_quantize_types(const onnx::GraphProto& gp, Graph& g, const std::string& path) {
  std::map<std::string, int> type;             // initializer and Constant values -> ONNX type
  std::map<std::string, std::string> through;  // Identity output -> its input
  for (const auto& init : gp.initializer()) type[init.name()] = init.data_type();
  for (const auto& np : gp.node()) {
    if (np.op_type() == "Identity" && np.input_size() == 1 && np.output_size() == 1) through[np.output(0)] = np.input(0);
    if (np.op_type() != "Constant" || np.output_size() != 1) continue;
    for (const auto& ap : np.attribute())
      if (ap.name() == "value" && ap.type() == onnx::AttributeProto::TENSOR) type[np.output(0)] = ap.t().data_type();
  }
  for (auto& n : g.nodes) {
    if (n.op != "QuantizeLinear" || n.inputs.size() < 3 || n.inputs[2].empty()) continue;
    std::string zp = n.inputs[2];
    for (int hops = 0; through.count(zp) && hops < 64; ++hops) zp = through.at(zp);
    auto it = type.find(zp);
    if (it == type.end()) continue;
    const int64_t out = n.attr_i("output_dtype", 0);
    if (out != 0 && out != it->second)
      throw DataError(path + ": " + n.label() + " has output_dtype " + std::to_string(out) + " but its zero point '" +
                      n.inputs[2] + "' is ONNX type " + std::to_string(it->second) + " (they must be equal)");
    if (out == 0 && (it->second == kOnnxInt4 || it->second == kOnnxUInt4 || it->second == onnx::TensorProto::UINT16)) {
      Attr a;
      a.i = it->second;
      n.attrs["output_dtype"] = a;
    }
  }
}

Graph load_onnx_bytes(const std::string& bytes, const std::string& path) {
  onnx::ModelProto mp;
  if (bytes.empty() || !mp.ParseFromString(bytes) || !mp.has_graph())
    throw IoError(path + ": not an ONNX model (truncated or not protobuf ModelProto)");
  Graph g;
  g.path = path;
  for (const auto& os : mp.opset_import()) {
    if (os.domain().empty() || os.domain() == "ai.onnx") g.opset = os.version();
  }
  if (g.opset < 13 || g.opset > 21)
    throw UnsupportedOpError(path + ": ONNX opset " + std::to_string(g.opset) + " is not supported (13 to 21)");
  for (const auto& kv : mp.metadata_props())
    if (kv.key() == kArithmeticMetadataKey) g.arithmetic = Arithmetic::from_json(kv.value(), path);
  const auto& gp = mp.graph();
  for (const auto& init : gp.initializer()) g.initializers[init.name()] = to_tensor(init, path);
  for (const auto& in : gp.input())
    if (!g.initializers.count(in.name())) g.inputs.push_back(to_value_info(in, path));
  for (const auto& out : gp.output()) g.outputs.push_back(to_value_info(out, path));
  for (const auto& np : gp.node()) {
    // com.microsoft's QuantizeLinear / DequantizeLinear are ONNX's with 16-bit
    // types (ONNX Runtime's contrib ops; standard ONNX has int16 from opset 21):
    // qfx writes them for int16 activations and runs them as the standard ops.
    const bool ms_qdq = np.domain() == kMicrosoftDomain && (np.op_type() == "QuantizeLinear" || np.op_type() == "DequantizeLinear");
    const bool ms_nbits = np.domain() == kMicrosoftDomain && np.op_type() == "MatMulNBits";
    if (!np.domain().empty() && np.domain() != "ai.onnx" && !ms_qdq && !ms_nbits)
      throw UnsupportedOpError(path + ": node '" + np.name() + "' (" + np.domain() + "::" + np.op_type() +
                               ") is from a custom domain qfx does not run");
    if (np.domain().empty() && np.op_type() == "MatMulNBits")
      throw UnsupportedOpError(path + ": node '" + np.name() + "' (MatMulNBits) is com.microsoft's; the default domain has no such op");
    Node n;
    n.op = np.op_type();
    n.name = np.name().empty() ? (np.output_size() ? np.output(0) : n.op) : np.name();
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    // Every op qfx runs produces its first output; passes read outputs[0].
    if (n.outputs.empty() || n.outputs[0].empty())
      throw DataError(path + ": node '" + n.name + "' (" + n.op + ") has no output");
    for (const auto& ap : np.attribute()) {
      Attr a;
      switch (ap.type()) {
        case onnx::AttributeProto::INT: a.kind = Attr::Kind::kInt; a.i = ap.i(); break;
        case onnx::AttributeProto::FLOAT: a.kind = Attr::Kind::kFloat; a.f = ap.f(); break;
        case onnx::AttributeProto::INTS: a.kind = Attr::Kind::kInts; a.ints.assign(ap.ints().begin(), ap.ints().end()); break;
        case onnx::AttributeProto::FLOATS: a.kind = Attr::Kind::kFloats; a.floats.assign(ap.floats().begin(), ap.floats().end()); break;
        case onnx::AttributeProto::STRING: a.kind = Attr::Kind::kString; a.s = ap.s(); break;
        case onnx::AttributeProto::TENSOR: a.kind = Attr::Kind::kTensor; a.t = to_tensor(ap.t(), path); break;
        default: continue;  // graphs, sparse tensors: not used by supported ops
      }
      n.attrs[ap.name()] = std::move(a);
    }
    if (ms_nbits) {
      lower_matmul_nbits(n, g, path);
      continue;
    }
    g.nodes.push_back(std::move(n));
  }
  annotate_quantize_types(gp, g, path);
  validate_assignments(g, path);
  validate_parameters(g, path);
  return g;
}

void simplify(Graph& g) {
  std::vector<Node> kept;
  std::map<std::string, std::string> alias;
  auto resolve = [&](const std::string& v) {
    auto it = alias.find(v);
    return it == alias.end() ? v : it->second;
  };
  std::set<std::string> outputs;
  for (const auto& o : g.outputs) outputs.insert(o.name);
  for (auto& n : g.nodes) {
    for (auto& i : n.inputs) i = resolve(i);
    if (n.op == "Constant" && n.has("value") && n.outputs.size() == 1) {
      g.initializers[n.outputs[0]] = n.attrs.at("value").t;
      continue;
    }
    if (n.op == "Identity" && n.inputs.size() == 1 && !outputs.count(n.outputs[0])) {
      alias[n.outputs[0]] = n.inputs[0];
      continue;
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
}

}  // namespace qfx::runtime::ir

namespace qfx::runtime::ir {

bool clip_bound(const Graph& g, const Node& clip, size_t k, float* v) {
  if (clip.inputs.size() <= k || clip.inputs[k].empty()) return true;
  auto c = g.initializers.find(clip.inputs[k]);
  if (c == g.initializers.end() || c->second.dtype() != DType::kFloat32 || c->second.numel() != 1) return false;
  *v = c->second.data<float>()[0];
  return true;
}

void fuse_float_activations(Graph& g, const std::set<std::string>& keep) {
  std::map<std::string, int> uses;
  for (const auto& n : g.nodes)
    for (const auto& i : n.inputs) ++uses[i];
  std::set<std::string> outs;
  for (const auto& o : g.outputs) outs.insert(o.name);
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs) producer[o] = i;
  std::vector<bool> drop(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& act = g.nodes[i];
    if ((act.op != "Relu" && act.op != "Clip") || act.inputs.empty()) continue;
    auto it = producer.find(act.inputs[0]);
    if (it == producer.end()) continue;
    Node& p = g.nodes[it->second];
    if ((p.op != "Conv" && p.op != "Gemm" && p.op != "Add") || !p.fused_act.empty() || p.outputs.size() != 1 ||
        uses[p.outputs[0]] != 1 || outs.count(p.outputs[0]) || keep.count(p.outputs[0]))
      continue;
    float lo = -3.4e38f, hi = 3.4e38f;
    if (act.op == "Clip" && (!clip_bound(g, act, 1, &lo) || !clip_bound(g, act, 2, &hi))) continue;
    p.fused_act = act.op;
    p.clip_lo = lo;
    p.clip_hi = hi;
    p.outputs = act.outputs;
    producer[act.outputs[0]] = it->second;
    drop[i] = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

}  // namespace qfx::runtime::ir
