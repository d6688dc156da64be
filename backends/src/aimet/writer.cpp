// The AIMET pair: the int8 QDQ model's float graph and its encodings (1.0.0, 2.0.0).
#include "qfx/runtime/aimet.h"

#include <onnx/onnx_pb.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "../onnx_tensor.h"
#include "../reference/dequantize.h"
#include "qfx/atomic_file.h"
#include "qfx/error.h"

namespace qfx::runtime {
namespace {

using nlohmann::json;

// One tensor's quantization as ONNX's QuantizeLinear / DequantizeLinear state it.
struct Encoding {
  std::string name;
  int bits = 8;
  bool is_signed = false;
  std::vector<double> scale;
  std::vector<int64_t> zero_point;
  std::vector<int64_t> scale_shape;  // the scale tensor's shape ([] per tensor)
  int64_t axis = 0;                  // the DequantizeLinear's axis (per channel: the channel; blocked: the block axis)
  int64_t block_size = 0;
  bool param = false;
};

// Bits and signedness of an ONNX integer element type (TensorProto.DataType).
bool integer_type(int t, int* bits, bool* is_signed) {
  switch (t) {
    case onnx::TensorProto::INT8: *bits = 8, *is_signed = true; return true;
    case onnx::TensorProto::UINT8: *bits = 8, *is_signed = false; return true;
    case onnx::TensorProto::INT16: *bits = 16, *is_signed = true; return true;
    case onnx::TensorProto::UINT16: *bits = 16, *is_signed = false; return true;
    case onnx::TensorProto::INT32: *bits = 32, *is_signed = true; return true;
    case static_cast<int>(ir::kOnnxInt4): *bits = 4, *is_signed = true; return true;
    case static_cast<int>(ir::kOnnxUInt4): *bits = 4, *is_signed = false; return true;
    default: return false;
  }
}

int64_t attr_i(const onnx::NodeProto& n, const char* name, int64_t def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return def;
}

std::string label(const onnx::NodeProto& n) { return "node '" + n.name() + "' (" + n.op_type() + ")"; }

// The model being rewritten: its initializers by name and who reads each value.
struct Rewrite {
  onnx::ModelProto mp;
  std::string what;
  std::map<std::string, int> init;                      // initializer name -> index
  std::map<std::string, std::vector<int>> readers;      // value -> nodes reading it
  std::set<std::string> outputs;                        // graph outputs

  Tensor constant(const std::string& name) const {
    return ir::to_tensor(mp.graph().initializer(init.at(name)), what);
  }
  int elem_type(const std::string& name) const { return mp.graph().initializer(init.at(name)).data_type(); }
};

std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<float>()[i];
  return v;
}

std::vector<int64_t> as_ints(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype()) {
      case DType::kInt8: v[i] = t.data<int8_t>()[i]; break;
      case DType::kUInt8: v[i] = t.data<uint8_t>()[i]; break;
      case DType::kInt16: v[i] = t.data<int16_t>()[i]; break;
      case DType::kInt32: v[i] = t.data<int32_t>()[i]; break;
      default: v[i] = t.data<int64_t>()[i];
    }
  }
  return v;
}

// The qparams of a QuantizeLinear / DequantizeLinear node: scale (input 1), zero
// point (input 2, absent: 0 of `codes_type`), axis and block size.
Encoding qparams(const Rewrite& rw, const onnx::NodeProto& n, const std::string& name, int codes_type) {
  Encoding e;
  e.name = name;
  if (n.input_size() < 2 || !rw.init.count(n.input(1)))
    throw UnsupportedOpError(rw.what + ": " + label(n) + ": a scale that is not a constant has no AIMET encoding");
  const Tensor s = rw.constant(n.input(1));
  if (s.dtype() != DType::kFloat32) throw DataError(rw.what + ": " + label(n) + ": scale is not float32");
  e.scale = as_doubles(s);
  e.scale_shape = s.shape();
  const bool has_zp = n.input_size() > 2 && !n.input(2).empty();
  if (has_zp && !rw.init.count(n.input(2)))
    throw UnsupportedOpError(rw.what + ": " + label(n) + ": a zero point that is not a constant has no AIMET encoding");
  const int t = has_zp ? rw.elem_type(n.input(2)) : codes_type;
  if (!integer_type(t, &e.bits, &e.is_signed))
    throw UnsupportedOpError(rw.what + ": " + label(n) + ": element type " + std::to_string(t) + " is not an integer type");
  e.zero_point = has_zp ? as_ints(rw.constant(n.input(2))) : std::vector<int64_t>(e.scale.size(), 0);
  e.axis = attr_i(n, "axis", 1);
  e.block_size = attr_i(n, "block_size", 0);
  return e;
}

// The runtime's form of ONNX node `n`: what the reference DequantizeLinear reads
// (its inputs, outputs and integer attributes: axis, block_size).
ir::Node ir_node(const onnx::NodeProto& n) {
  ir::Node r;
  r.op = n.op_type();
  r.name = n.name().empty() ? n.output(0) : n.name();
  r.inputs.assign(n.input().begin(), n.input().end());
  r.outputs.assign(n.output().begin(), n.output().end());
  for (const auto& a : n.attribute())
    if (a.type() == onnx::AttributeProto::INT) {
      r.attrs[a.name()].kind = ir::Attr::Kind::kInt;
      r.attrs[a.name()].i = a.i();
    }
  return r;
}

// A constant DequantizeLinear's float result, as the reference kernel computes it.
onnx::TensorProto dequantized(const Rewrite& rw, const onnx::NodeProto& n) {
  const Tensor codes = rw.constant(n.input(0)), scale = rw.constant(n.input(1));
  const Tensor zp = n.input_size() > 2 && !n.input(2).empty() ? rw.constant(n.input(2)) : Tensor();
  const Tensor y = dequantize_constant(ir_node(n), codes, {&codes, &scale, zp.defined() ? &zp : nullptr});
  onnx::TensorProto t;
  t.set_name(n.output(0));
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : y.shape()) t.add_dims(d);
  t.set_raw_data(std::string(static_cast<const char*>(y.raw()), y.nbytes()));
  return t;
}

// The 1.0.0 entry: bw, is_sym, scale and offset as AIMET's unsigned-offset
// convention states them (offset = -zero point of the unsigned grid).
json entry_1_0_0(const Encoding& e) {
  bool symmetric = e.is_signed;
  for (int64_t z : e.zero_point) symmetric = symmetric && z == 0;
  const int64_t half = e.is_signed ? int64_t{1} << (e.bits - 1) : 0;  // signed codes + half = unsigned codes
  json offset = json::array(), scale = json::array();
  std::vector<size_t> order(e.scale.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (e.block_size > 0 && e.scale_shape.size() == 2 && (e.axis == 0 || e.axis == -2)) {
    // 1.0.0 lists blocks channel-major ([channel][block]); a scale blocked along axis 0 is [block][channel].
    const size_t nb = static_cast<size_t>(e.scale_shape[0]), nc = static_cast<size_t>(e.scale_shape[1]);
    for (size_t c = 0; c < nc; ++c)
      for (size_t b = 0; b < nb; ++b) order[c * nb + b] = b * nc + c;
  }
  for (size_t i : order) {
    scale.push_back(e.scale[i]);
    offset.push_back(-(e.zero_point[i] + half));
  }
  json j = {{"name", e.name}, {"dtype", "INT"}, {"bw", e.bits}, {"is_sym", symmetric}, {"scale", scale}, {"offset", offset}};
  if (e.block_size > 0) {
    j["enc_type"] = "PER_BLOCK";
    j["block_size"] = e.block_size;
  } else {
    j["enc_type"] = e.scale.size() > 1 ? "PER_CHANNEL" : "PER_TENSOR";
  }
  return j;
}

// A flat list nested into `shape` (row-major).
template <typename T>
json nest(const std::vector<T>& v, const std::vector<int64_t>& shape, size_t dim = 0, size_t* at = nullptr) {
  size_t start = 0;
  if (!at) at = &start;
  if (dim == shape.size()) return v[(*at)++];
  json a = json::array();
  for (int64_t i = 0; i < shape[dim]; ++i) a.push_back(nest(v, shape, dim + 1, at));
  return a;
}

// The 2.0.0 entry: ONNX's QuantizeLinear fields.
json entry_2_0_0(const Encoding& e) {
  json j = {{"name", e.name}, {"output_dtype", std::string(e.is_signed ? "int" : "uint") + std::to_string(e.bits)}};
  bool zero = true;
  for (int64_t z : e.zero_point) zero = zero && z == 0;
  if (e.block_size > 0) {
    j["y_scale"] = nest(e.scale, e.scale_shape);
    if (!zero) j["y_zero_point"] = nest(e.zero_point, e.scale_shape);
    j["axis"] = e.axis;
    j["block_size"] = e.block_size;
  } else if (e.scale.size() > 1) {
    j["y_scale"] = e.scale;
    if (!zero) j["y_zero_point"] = e.zero_point;
    j["axis"] = e.axis;
  } else {
    j["y_scale"] = e.scale.at(0);
    if (!zero) j["y_zero_point"] = e.zero_point.at(0);
  }
  return j;
}

Rewrite read_model(const std::string& onnx_path, const std::string& what) {
  std::ifstream f(onnx_path, std::ios::binary);
  if (!f) throw IoError(what + ": cannot open ONNX model (missing or unreadable)");
  std::stringstream ss;
  ss << f.rdbuf();
  Rewrite rw;
  rw.what = what;
  if (!rw.mp.ParseFromString(ss.str()) || !rw.mp.has_graph())
    throw IoError(what + ": not an ONNX model (truncated or not protobuf ModelProto)");
  const auto& g = rw.mp.graph();
  for (int i = 0; i < g.initializer_size(); ++i) rw.init[g.initializer(i).name()] = i;
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& in : g.node(i).input()) rw.readers[in].push_back(i);
  for (const auto& o : g.output()) rw.outputs.insert(o.name());
  return rw;
}

// Removes the Q/DQ nodes: fills `encodings`, `float_inits` (constant DQ results) and
// `rename` (a removed DQ's output -> the float value it stood for); returns the kept nodes.
std::vector<onnx::NodeProto> strip(const Rewrite& rw, std::vector<Encoding>* encodings, std::vector<onnx::TensorProto>* float_inits,
                                   std::map<std::string, std::string>* rename) {
  const auto& g = rw.mp.graph();
  std::map<std::string, std::string> float_of_q;  // a removed QuantizeLinear's output -> its float input
  std::vector<onnx::NodeProto> kept;
  for (const auto& n : g.node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      throw UnsupportedOpError(rw.what + ": " + label(n) + ": custom-domain op '" + n.domain() +
                               "' has no place in AIMET's float graph (write block-wise weights as DequantizeLinear)");
    if (n.op_type() == "QuantizeLinear") {
      for (int r : rw.readers.count(n.output(0)) ? rw.readers.at(n.output(0)) : std::vector<int>{})
        if (g.node(r).op_type() != "DequantizeLinear")
          throw UnsupportedOpError(rw.what + ": " + label(n) + ": its codes are read by " + label(g.node(r)) +
                                   ", which AIMET's float graph cannot express");
      if (rw.outputs.count(n.output(0)))
        throw UnsupportedOpError(rw.what + ": " + label(n) + ": the model returns int8 codes, which AIMET's float graph cannot express");
      const int t = n.input_size() > 2 && rw.init.count(n.input(2)) ? rw.elem_type(n.input(2))
                                                                     : static_cast<int>(attr_i(n, "output_dtype", onnx::TensorProto::UINT8));
      encodings->push_back(qparams(rw, n, n.input(0), t));
      float_of_q[n.output(0)] = n.input(0);
      continue;
    }
    if (n.op_type() == "DequantizeLinear") {
      if (float_of_q.count(n.input(0))) {
        (*rename)[n.output(0)] = float_of_q.at(n.input(0));
        continue;
      }
      if (!rw.init.count(n.input(0)))
        throw UnsupportedOpError(rw.what + ": " + label(n) + ": dequantizes codes that are neither a constant nor a QuantizeLinear's");
      Encoding e = qparams(rw, n, n.output(0), rw.elem_type(n.input(0)));
      e.param = true;
      float_inits->push_back(dequantized(rw, n));
      if (e.bits < 32) encodings->push_back(e);  // int32 biases: the converter derives them from input x weight scales
      continue;
    }
    kept.push_back(n);
  }
  return kept;
}

// The float model: kept nodes reading the float values, an Identity for each output
// a removed DequantizeLinear wrote, the new float initializers, nothing unused.
void rebuild(Rewrite& rw, std::vector<onnx::NodeProto> nodes, const std::vector<onnx::TensorProto>& float_inits,
             const std::map<std::string, std::string>& rename) {
  auto* g = rw.mp.mutable_graph();
  for (auto& n : nodes)
    for (int i = 0; i < n.input_size(); ++i)
      if (auto it = rename.find(n.input(i)); it != rename.end()) n.set_input(i, it->second);
  for (const auto& o : g->output())
    if (auto it = rename.find(o.name()); it != rename.end()) {
      onnx::NodeProto id;
      id.set_op_type("Identity");
      id.set_name(o.name() + "_identity");
      id.add_input(it->second);
      id.add_output(o.name());
      nodes.push_back(id);
    }
  std::set<std::string> read;
  for (const auto& n : nodes)
    for (const auto& in : n.input()) read.insert(in);
  g->clear_node();
  for (auto& n : nodes) *g->add_node() = std::move(n);
  std::vector<onnx::TensorProto> inits;
  for (const auto& t : g->initializer())
    if (read.count(t.name())) inits.push_back(t);
  for (const auto& t : float_inits)
    if (read.count(t.name())) inits.push_back(t);
  g->clear_initializer();
  for (auto& t : inits) *g->add_initializer() = std::move(t);
  std::set<std::string> written;
  for (const auto& n : g->node())
    for (const auto& o : n.output()) written.insert(o);
  auto* vi = g->mutable_value_info();
  for (int i = vi->size() - 1; i >= 0; --i)
    if (!written.count(vi->Get(i).name())) vi->DeleteSubrange(i, 1);
  auto* meta = rw.mp.mutable_metadata_props();
  for (int i = meta->size() - 1; i >= 0; --i)
    if (meta->Get(i).key() == "qfx.arithmetic") meta->DeleteSubrange(i, 1);  // no integer ops left to describe
}

}  // namespace

AimetSummary write_aimet(const std::string& onnx_path, const std::string& model_path, const std::string& encodings_path,
                         const AimetOptions& options) {
  if (options.version != "1.0.0" && options.version != "2.0.0")
    throw ConfigError("AIMET encodings version '" + options.version + "' is not one qfx writes (1.0.0, 2.0.0)");
  Rewrite rw = read_model(onnx_path, options.what.empty() ? onnx_path : options.what);
  std::vector<Encoding> encodings;
  std::vector<onnx::TensorProto> float_inits;
  std::map<std::string, std::string> rename;
  std::vector<onnx::NodeProto> nodes = strip(rw, &encodings, &float_inits, &rename);
  rebuild(rw, std::move(nodes), float_inits, rename);
  AimetSummary sum;
  json acts = json::array(), params = json::array(), all = json::array();
  for (const auto& e : encodings) {
    (e.param ? sum.params : sum.activations)++;
    if (options.version == "2.0.0") all.push_back(entry_2_0_0(e));
    else (e.param ? params : acts).push_back(entry_1_0_0(e));
  }
  const json doc = options.version == "2.0.0"
                       ? json{{"version", "2.0.0"}, {"encodings", all}}
                       : json{{"version", "1.0.0"}, {"activation_encodings", acts}, {"param_encodings", params}, {"excluded_layers", json::array()}};
  std::string bytes;
  if (!rw.mp.SerializeToString(&bytes)) throw IoError(model_path + ": the float model could not be serialized");
  write_file_atomic(model_path, bytes);
  write_file_atomic(encodings_path, doc.dump(2) + "\n");
  return sum;
}

}  // namespace qfx::runtime
