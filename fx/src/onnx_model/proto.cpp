// ONNX ModelProto reading: the file, its tensors (inline or external data) and
// node attributes.
#include "proto.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "qfx/error.h"
#include "qfx/onnx_external.h"

namespace qfx::fx::onnx_detail {
namespace {

namespace fs = std::filesystem;

struct ElemType {
  at::ScalarType stored;  // as the payload holds it
  size_t bytes;
  bool widen;  // float16 / float64: read, then converted to float32
};

ElemType elem_type(int t, const std::string& what) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return {at::kFloat, 4, false};
    case onnx::TensorProto::FLOAT16: return {at::kHalf, 2, true};
    case onnx::TensorProto::DOUBLE: return {at::kDouble, 8, true};
    case onnx::TensorProto::INT8: return {at::kChar, 1, false};
    case onnx::TensorProto::UINT8: return {at::kByte, 1, false};
    case onnx::TensorProto::INT16: return {at::kShort, 2, false};
    case onnx::TensorProto::INT32: return {at::kInt, 4, false};
    case onnx::TensorProto::INT64: return {at::kLong, 8, false};
    case onnx::TensorProto::BOOL: return {at::kBool, 1, false};
    default:
      throw DataError(what + ": ONNX element type " + std::to_string(t) +
                      " is not supported (float32, float16, float64, int8, uint8, int16, int32, int64, bool)");
  }
}

// The typed repeated field that holds the payload when raw_data is absent.
at::Tensor typed_payload(const onnx::TensorProto& tp, const ElemType& et, uint64_t n, const std::string& what) {
  auto check = [&](uint64_t got) {
    if (got != n) throw IoError(what + " holds " + std::to_string(got) + " values, its dims need " + std::to_string(n));
  };
  const auto sn = static_cast<int64_t>(n);
  switch (tp.data_type()) {
    case onnx::TensorProto::FLOAT:
      check(tp.float_data_size());
      return at::from_blob(const_cast<float*>(tp.float_data().data()), {sn}, at::kFloat).clone();
    case onnx::TensorProto::DOUBLE:
      check(tp.double_data_size());
      return at::from_blob(const_cast<double*>(tp.double_data().data()), {sn}, at::kDouble).clone();
    case onnx::TensorProto::INT64:
      check(tp.int64_data_size());
      return at::from_blob(const_cast<int64_t*>(tp.int64_data().data()), {sn}, at::kLong).clone();
    default: {  // int32_data carries int32, int16, int8, uint8, bool and float16 bits
      check(tp.int32_data_size());
      at::Tensor t = at::from_blob(const_cast<int32_t*>(tp.int32_data().data()), {sn}, at::kInt).clone();
      if (et.stored == at::kHalf) return t.to(at::kShort).view(at::kHalf);
      return t.to(et.stored);
    }
  }
}

}  // namespace

onnx::ModelProto read_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open the ONNX model");
  std::stringstream ss;
  ss << in.rdbuf();
  onnx::ModelProto m;
  if (!m.ParseFromString(ss.str()))
    throw IoError(path + ": not an ONNX model (the protobuf does not parse: a truncated or foreign file)");
  if (!m.has_graph() || m.graph().node_size() == 0) throw IoError(path + ": the ONNX model has no graph nodes");
  return m;
}

int64_t default_opset(const onnx::ModelProto& m, const std::string& path) {
  int64_t opset = 0;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  for (const auto& n : m.graph().node())
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      throw UnsupportedOpError(path + ": node " + n.name() + " (" + n.op_type() + ") is of domain '" + n.domain() +
                               "'; qfx reads the default ONNX domain (a float model, not an already quantized one)");
  if (opset < 13)
    throw UnsupportedOpError(path + ": opset " + std::to_string(opset) +
                             "; qfx reads opset 13 and newer (re-export with opset_version=17, or upgrade the file: "
                             "onnx.version_converter.convert_version(onnx.load(path), 17))");
  return opset;
}

at::Tensor to_tensor(const onnx::TensorProto& tp, const std::string& path, const std::string& model_dir) {
  const std::string what = path + ": tensor '" + tp.name() + "'";
  const ElemType et = elem_type(tp.data_type(), what);
  std::vector<int64_t> shape(tp.dims().begin(), tp.dims().end());
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw IoError(what + " has a negative dimension");
    if (d != 0 && n > (uint64_t{1} << 40) / static_cast<uint64_t>(d)) throw IoError(what + " declares too many elements");
    n *= static_cast<uint64_t>(d);
  }
  const uint64_t nbytes = n * et.bytes;
  at::Tensor t;
  if (tp.data_location() == onnx::TensorProto::EXTERNAL || tp.has_raw_data()) {
    const std::string bytes = tp.has_raw_data() ? tp.raw_data() : onnx_external::external_bytes(tp, what, model_dir, nbytes);
    if (bytes.size() != nbytes)
      throw IoError(what + " holds " + std::to_string(bytes.size()) + " bytes, its dims need " + std::to_string(nbytes));
    t = at::empty({static_cast<int64_t>(n)}, at::TensorOptions().dtype(et.stored));
    if (nbytes) std::memcpy(t.data_ptr(), bytes.data(), nbytes);
  } else {
    t = typed_payload(tp, et, n, what);
  }
  t = t.reshape(shape);
  return et.widen ? t.to(at::kFloat) : t;
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t attr_i(const onnx::NodeProto& n, const std::string& name, int64_t def) {
  const auto* a = attribute(n, name);
  return a ? a->i() : def;
}
float attr_f(const onnx::NodeProto& n, const std::string& name, float def) {
  const auto* a = attribute(n, name);
  return a ? a->f() : def;
}
std::string attr_s(const onnx::NodeProto& n, const std::string& name, const std::string& def) {
  const auto* a = attribute(n, name);
  return a ? a->s() : def;
}
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name, std::vector<int64_t> def) {
  const auto* a = attribute(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : def;
}

}  // namespace qfx::fx::onnx_detail
