// Internal: the runtime's graph IR, loaded from ONNX (no protobuf types leak out).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "qfx/runtime/kernel.h"  // ir::Attr, ir::QInfo, ir::Node
#include "qfx/runtime/tensor.h"

namespace qfx::runtime::ir {

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
  /// The target arithmetic from the model's `qfx.arithmetic` metadata (default: ONNX's).
  Arithmetic arithmetic;
};

/// Parses an ONNX file (opset 13..21 of the default domain). Throws IoError for a
/// missing, truncated or non-ONNX file, UnsupportedOpError for another opset or
/// domain, and DataError for unsupported tensor types.
Graph load_onnx(const std::string& path);
/// The same for a serialized ModelProto in memory; `what` names it in errors.
Graph load_onnx_bytes(const std::string& bytes, const std::string& what);

/// The qparams of a QuantizeLinear / DequantizeLinear from its constant inputs
/// (ONNX opset 13): `scale` float32 with at least one element (one per channel
/// along `axis` when more); `zero_point`, if given, uint8, int8 or int32 with as
/// many elements (it sets the dtype); absent, zeros of dtype `fallback`. Returns
/// nullopt and the reason in `*why` for anything else, so no read runs past a
/// constant's data. Callers decide what a refusal means (QDQ matching leaves the
/// group in float, the reference kernels report the node).
std::optional<QInfo> read_qparams(const Tensor& scale, const Tensor* zero_point, DType fallback, int64_t axis,
                                  std::string* why);

/// ONNX TensorProto.DataType values of the 4-bit types (opset 21), which the
/// Debian onnx.proto does not name.
inline constexpr int64_t kOnnxUInt4 = 21;
inline constexpr int64_t kOnnxInt4 = 22;

/// The runtime dtype that stores ONNX integer element type `t` and the type's
/// inclusive range: INT4 int8 [-8, 7], UINT4 uint8 [0, 15], INT8, UINT8, INT16,
/// UINT16 int32 [0, 65535], INT32. False for any other type.
bool onnx_integer_type(int64_t t, DType* storage, int32_t* lo, int32_t* hi);

/// Why (De)QuantizeLinear `n` is not a plain per-tensor / per-axis 8- or 16-bit
/// node that QDQ matching and the device kernels may take: "block_size N" for a
/// blocked one (opset 21), "output_dtype T" for a QuantizeLinear to INT4, UINT4 or
/// UINT16 (a range narrower than its storage dtype's, or unsigned 16-bit) or one
/// whose output_dtype alone (no zero point) says its type; empty for a plain one.
/// Such nodes run as the reference kernels compute them.
std::string qdq_refusal(const Node& n);

/// An INT attribute holding `v`, a FLOAT one and a STRING one (for passes that
/// write nodes).
inline Attr int_attr(int64_t v) {
  Attr a;
  a.kind = Attr::Kind::kInt;
  a.i = v;
  return a;
}
inline Attr float_attr(float v) {
  Attr a;
  a.kind = Attr::Kind::kFloat;
  a.f = v;
  return a;
}
inline Attr string_attr(std::string v) {
  Attr a;
  a.kind = Attr::Kind::kString;
  a.s = std::move(v);
  return a;
}

/// Folds Constant nodes into initializers and drops Identity nodes.
void simplify(Graph& g);

/// Clip input `k` (1: min, 2: max) of `clip` into `*v`: true if the input is absent
/// (`*v` keeps the caller's unbounded value) or a one-element float32 initializer;
/// false for a bound computed at run time (the Clip then cannot be fused).
bool clip_bound(const Graph& g, const Node& clip, size_t k, float* v);

/// Fuses a Relu or Clip (constant bounds) that is the only consumer of a float
/// Conv, Gemm or Add into it (`fused_act`), so backends run it as a post-op.
/// Values named in `keep` are never fused away.
void fuse_float_activations(Graph& g, const std::set<std::string>& keep = {});

/// Matches QDQ groups (DequantizeLinear -> op -> QuantizeLinear) into int8 ops
/// the reference kernels run (and, for the ops in `g.arithmetic.lut`, QLut table
/// ops); returns one line per group left in float and why.
std::vector<std::string> fuse_qdq(Graph& g);

}  // namespace qfx::runtime::ir
