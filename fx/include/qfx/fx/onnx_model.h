// Float ONNX models as input: an ONNX file read in C++ into qfx's fx GraphModule,
// so the same passes, observers and algorithms apply as to traced PyTorch models.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"

namespace qfx::fx {

/// Options of load_onnx_model.
struct OnnxModelOptions {
  /// One shape per graph input (in the model's input order), overriding the
  /// model's declared dims: a value > 0 fixes that dim, -1 keeps the model's.
  /// Dims the model leaves symbolic other than dim 0 (the batch) must be fixed
  /// here; empty: the declared shapes.
  std::vector<std::vector<int64_t>> input_shapes;
  /// Rebuild Conv, ConvTranspose, Gemm / MatMul(+Add) with constant weights,
  /// BatchNormalization and LayerNormalization as torch.nn modules (Conv1d/2d/3d,
  /// ConvTranspose2d, Linear, BatchNorm1d/2d/3d, LayerNorm): call_module nodes,
  /// as the TorchScript tracer gives, so one set of fusion and quantization
  /// patterns serves every frontend. Off: aten call_functions over get_attr weights.
  bool rebuild_modules = true;
};

/// Reads a float ONNX model (ModelProto, default domain, opset 13 and newer;
/// external data from files inside the model's folder) into a GraphModule:
/// - one placeholder per graph input, named by it (non-identifier characters as
///   '_'), meta "traced_shape" with -1 for a dim left dynamic;
/// - each ONNX node as the aten operator that computes it ("Relu" ->
///   aten::relu, "Add" -> aten::add.Tensor, "Resize" -> aten::upsample_*), the
///   weighted layers as modules (options). A module's path is the PyTorch path
///   its weight's name carries ("layer1.0.conv1" for "layer1.0.conv1.weight")
///   or else the node's name; meta "onnx_node" keeps the node's name and
///   meta "module_path" the path per-node overrides match;
/// - shape arithmetic (Shape, Gather, Slice, Concat, Unsqueeze, Squeeze, Cast,
///   integer Add / Sub / Mul / Div) folded to constants where the shapes are
///   static and kept as aten::size / int ops where a dim is dynamic, so a dynamic
///   batch stays dynamic; any other node whose inputs are all constants is
///   computed at load time;
/// - one output per graph output (a tuple, keyed by the output names, when
///   there are several).
/// The module is in eval mode; parameters are trainable (QAT).
/// Throws IoError naming `path` for a missing, truncated or foreign file and a
/// short or escaping tensor payload; UnsupportedOpError naming the node and op
/// type for an op qfx does not read (the message lists what it reads), another
/// domain, opset < 13, or shape arithmetic over dynamic dims it cannot follow
/// (fix the input shape); DataError for an input dim that must be fixed.
std::shared_ptr<GraphModule> load_onnx_model(const std::string& path, const OnnxModelOptions& options = {});

/// A graph input of an ONNX model as the model declares it.
struct OnnxInput {
  std::string name;
  std::string dtype;            ///< "float32", "int64", ... (ONNX's element type names, lowercase)
  std::vector<int64_t> shape;   ///< -1 for a symbolic or unknown dim
};

/// The graph inputs of the ONNX model at `path` (initializers listed as inputs
/// left out), in order. Throws IoError as load_onnx_model does.
std::vector<OnnxInput> onnx_model_inputs(const std::string& path);

/// True if `path` names an ONNX model: its extension is ".onnx" (any case).
/// Never throws.
bool is_onnx_model(const std::string& path);

/// The ONNX op types load_onnx_model reads, sorted.
std::vector<std::string> onnx_supported_ops();

}  // namespace qfx::fx
