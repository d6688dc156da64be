// LoweredModel: a prepared model's float graph as qfx's runtime runs it, exported
// and loaded once per job; calibration, evaluation and the per-layer SQNR share it.
#pragma once

#include <map>
#include <utility>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"
#include "qfx/quant/convert.h"
#include "qfx/runtime/model.h"

namespace qfx::quant {

/// Options of LoweredModel.
struct LowerOptions {
  /// Runtime backend that runs the float graph: "onednn", "reference" or a plug-in's.
  std::string backend = "onednn";
  /// Shape of each graph input (-1: dynamic), as ExportOptions::input_shapes.
  std::vector<std::vector<int64_t>> input_shapes;
  /// ONNX names of the graph inputs (default: the placeholders' names).
  std::vector<std::string> input_names;
  /// Element type of each graph input, as ExportOptions::input_dtypes.
  std::vector<std::string> input_dtypes;
};

/// The float graph of a prepared GraphModule (prepare_fx / prepare_qat_fx), lowered
/// once: exported to ONNX in memory (export_onnx_bytes with
/// ExportOptions::float_model: batch norm folded, FakeQuantize nodes as
/// pass-throughs), with the ONNX value each FakeQuantize call observes, and loaded
/// once on the runtime with those values kept observable (ModelOptions::keep_values,
/// any layout: `run` with a WatchLayout picks per run whether watched values arrive
/// plain or as stored).
///
/// The lowered model reflects the GraphModule's weights when it was built: rebuild
/// it after anything that changes weights or the graph (cross-layer
/// equalisation runs before it; AdaRound and bias correction change weights only
/// of the int8 model, which is exported separately).
class LoweredModel {
 public:
  /// Exports and loads `prepared`. Throws UnsupportedOpError naming the node the
  /// exporter cannot lower (wrapped calls, ops without an ONNX form), and the
  /// runtime's load errors (ConfigError for an unknown backend, UnsupportedOpError).
  LoweredModel(fx::GraphModule& prepared, const LowerOptions& options);

  /// The serialized float ONNX ModelProto (what `output.float_model` writes).
  const std::string& onnx() const { return onnx_; }
  /// Every activation FakeQuantize call of the prepared graph, in graph order, with
  /// the ONNX value it observes (ExportResult::observed).
  const std::vector<ObservedValue>& observed() const { return observed_; }
  /// The ONNX value holding fx node `node`'s observed output, or nullptr when no
  /// FakeQuantize observes that node.
  const std::string* tensor_of(const std::string& node) const;
  /// The loaded float model (fuse_qdq off: every op runs in float).
  runtime::Model& model() { return model_; }
  const runtime::Model& model() const { return model_; }

 private:
  LoweredModel(std::pair<std::string, ExportResult> exported, const LowerOptions& options);
  std::string onnx_;
  std::vector<ObservedValue> observed_;
  std::map<std::string, std::string> tensor_of_;
  runtime::Model model_;
};

}  // namespace qfx::quant
