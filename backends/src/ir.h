// Internal: the runtime's graph IR, loaded from ONNX (no protobuf types leak out).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "qfx/runtime/tensor.h"

namespace qfx::runtime::ir {

/// One ONNX attribute.
struct Attr {
  enum class Kind { kInt, kFloat, kInts, kFloats, kString, kTensor } kind = Kind::kInt;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string s;
  Tensor t;
};

/// Quantization parameters of one int8 value (per tensor, or per channel on `axis`).
struct QInfo {
  std::vector<float> scale;
  std::vector<int32_t> zero_point;
  DType dtype = DType::kUInt8;
  int64_t axis = 1;
  bool per_channel() const { return scale.size() > 1; }
};

/// One operation. `op` is the ONNX op type, or a qfx int8 op after QDQ matching
/// ("QConv", "QGemm", "QMatMul", "QAdd", "QMul", "QMaxPool", "QAveragePool",
/// "QGlobalAveragePool", "QConcat", "QRelu", "QClip", "QShape" for reshape-likes).
struct Node {
  std::string op;
  std::string name;
  std::vector<std::string> inputs;   // "" for an omitted optional input
  std::vector<std::string> outputs;
  std::map<std::string, Attr> attrs;
  // int8 ops: qparams of the quantized inputs and output, and the fused activation.
  std::vector<QInfo> in_q;
  QInfo out_q;
  std::string fused_act;             // "", "Relu", "Clip"
  float clip_lo = 0, clip_hi = 0;

  bool has(const std::string& a) const { return attrs.count(a) != 0; }
  int64_t attr_i(const std::string& a, int64_t def) const;
  float attr_f(const std::string& a, float def) const;
  std::vector<int64_t> attr_ints(const std::string& a, std::vector<int64_t> def = {}) const;
  std::string attr_s(const std::string& a, const std::string& def = "") const;
  /// "Conv 'conv1'" for messages.
  std::string label() const { return op + " '" + name + "'"; }
};

/// A graph input or output: name, element type, shape (-1 for a dynamic dim).
struct ValueInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
};

/// A loaded model.
struct Graph {
  std::string path;
  int64_t opset = 0;
  std::vector<Node> nodes;                   // topological order
  std::map<std::string, Tensor> initializers;
  std::vector<ValueInfo> inputs;             // excluding initializers
  std::vector<ValueInfo> outputs;
};

/// Parses an ONNX file (opset 13..17 of the default domain). Throws IoError for a
/// missing, truncated or non-ONNX file, UnsupportedOpError for another opset or
/// domain, and DataError for unsupported tensor types.
Graph load_onnx(const std::string& path);
/// The same for a serialized ModelProto in memory; `what` names it in errors.
Graph load_onnx_bytes(const std::string& bytes, const std::string& what);

/// Folds Constant nodes into initializers and drops Identity nodes.
void simplify(Graph& g);

/// Fuses a Relu or Clip (constant bounds) that is the only consumer of a float
/// Conv, Gemm or Add into it (`fused_act`), so backends run it as a post-op.
/// Values named in `keep` are never fused away.
void fuse_float_activations(Graph& g, const std::set<std::string>& keep = {});

/// Matches QDQ groups (DequantizeLinear -> op -> QuantizeLinear) into int8 ops
/// the reference kernels run; returns one line per group left in float and why.
std::vector<std::string> fuse_qdq(Graph& g);

}  // namespace qfx::runtime::ir
