// Internal: the state of one ONNX -> TFLite conversion: the QDQ-matched runtime
// graph, and per ONNX value the TFLite tensor that holds it (shape, layout,
// qparams). The op converters (ops.cpp) read inputs and add operators through it.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "../ir.h"
#include "flatbuffer.h"
#include "qfx/runtime/tflite.h"

namespace qfx::runtime::tflite {

/// An ONNX value as written: its TFLite tensor, logical (ONNX, NCHW) shape with the
/// batch as 1, whether it is stored NHWC, and its qparams (int8 values).
struct Value {
  int32_t tensor = -1;
  std::vector<int64_t> shape;
  bool nhwc = false;
  bool quantized = false;
  ir::QInfo q;
};

/// One conversion.
struct Writer {
  const ir::Graph& g;
  TfliteOptions options;
  bool dynamic_batch = false;
  ModelDef model;
  std::map<std::string, Value> values;
  /// The graph outputs and the values that reach one through Identity nodes only.
  std::set<std::string> outputs;

  /// The value `name` (a computed value or an int8 / int32 initializer, converted on
  /// first use with qparams `q`); throws UnsupportedOpError naming `n` otherwise.
  const Value& in(const ir::Node& n, const std::string& name, const ir::QInfo* q = nullptr);
  /// A new activation tensor for value `name` with logical shape `shape`.
  const Value& out(const std::string& name, std::vector<int64_t> shape, bool nhwc, int64_t type, const ir::QInfo* q);
  /// A constant tensor (data in TFLite's layout already).
  int32_t constant(const std::string& name, std::vector<int32_t> shape, int64_t type, std::string data,
                   std::vector<float> scale = {}, std::vector<int64_t> zp = {}, int32_t qdim = 0);
  /// Appends an operator.
  void op(int64_t code, const std::string& name, std::vector<int32_t> ins, std::vector<int32_t> outs,
          int64_t options_type = 0, OptionsWriter options = {});
};

/// TFLite's shape of a logical shape: NHWC for a 4-D value stored so.
std::vector<int32_t> tfl_shape(const std::vector<int64_t>& shape, bool nhwc);
/// The TFLite activation of a fused Relu / Clip of `n` (ActivationFunctionType);
/// throws UnsupportedOpError for bounds TFLite has none for.
int64_t fused_activation(const ir::Node& n);
/// Converts int8 op `n`; false when qfx has no TFLite form for its op.
bool convert_node(Writer& w, const ir::Node& n);

}  // namespace qfx::runtime::tflite
