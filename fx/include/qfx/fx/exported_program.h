// torch.export programs as input: the archive `torch.export.save(ep, "model.pt2")`
// writes, read in C++ into qfx's fx GraphModule.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"

namespace qfx::fx {

/// The serialized-graph schema versions load_exported_program reads: the major
/// version of torch/_export/serde/schema.py (SCHEMA_VERSION) it was written
/// against; archives of this major version (any minor) are read.
constexpr int kExportSchemaMajor = 8;

/// Options of load_exported_program.
struct ExportedProgramOptions {
  /// Rebuild the standard torch.nn layers the program calls (Conv1d/2d/3d,
  /// ConvTranspose2d, Linear, BatchNorm1d/2d/3d, ReLU, ReLU6, Sigmoid, Tanh, SiLU,
  /// Hardswish, Hardsigmoid, LeakyReLU, GELU, Softmax, Dropout, Flatten, MaxPool2d,
  /// AvgPool2d, AdaptiveAvgPool2d) as submodules at their original paths, from
  /// each node's `nn_module_stack` and the parameters it reads: call_module nodes,
  /// as the TorchScript tracer gives, so one set of fusion and quantization
  /// patterns serves both frontends. Off: every node stays a call_function over
  /// its aten operator and parameters are get_attr nodes.
  bool rebuild_modules = true;
};

/// Reads an ExportedProgram archive (`torch.export.save`, PT2 archive format):
/// models/<name>.json (the serialized graph, torch/_export/serde/schema.py),
/// data/weights (parameters and buffers, raw little-endian bytes) and
/// data/constants. Returns a GraphModule with
/// - a placeholder per user input (meta "traced_shape": -1 for a symbolic size),
/// - parameters and buffers registered at their original dotted names
///   (named_parameters() as in PyTorch), lifted inputs mapped back through the
///   graph signature: get_attr nodes, or the submodules rebuilt (options),
/// - call_function nodes whose targets are the aten overloads as registered
///   operators ("aten::conv2d", "aten::add.Tensor", custom ops "ns::op"), run by
///   the Interpreter through libtorch's operator registry; multi-output nodes
///   are followed by getitem nodes; meta "module_path" from nn_module_stack,
/// - one output (a tuple when the program returns several values).
/// The module is in eval mode. Custom operators must be registered before
/// (load_operator_library).
/// Throws IoError naming `path` for a missing, truncated or foreign file, an
/// archive holding no or several programs, weights stored pickled, and a schema
/// of another major version (naming both); UnsupportedOpError naming the node for
/// an operator no loaded library registers, a control-flow subgraph
/// (torch.cond / while_loop), a custom object or token input, or a program that
/// mutates buffers or inputs (batch norm in training mode, an in-place update of a
/// buffer: export the model in eval mode).
std::shared_ptr<GraphModule> load_exported_program(const std::string& path, const ExportedProgramOptions& options = {});

/// True if `path` is a zip archive holding a serialized exported program
/// (models/*.json beside data/), as torch.export.save writes; false for other
/// files (a TorchScript archive, ONNX). Never throws.
bool is_exported_program(const std::string& path);

/// The names of the program's tensor user inputs, in the order of its graph
/// signature (forward's arguments; the placeholders load_exported_program makes).
/// Reads the program's JSON only. Throws IoError as load_exported_program does.
std::vector<std::string> exported_program_inputs(const std::string& path);

}  // namespace qfx::fx
