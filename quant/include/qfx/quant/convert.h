// convert_fx: a calibrated (or QAT-trained) prepared model -> the converted model
// (torch.ao's reference quantized model, runnable in libtorch); export_onnx: a
// converted model -> the deployable int8 ONNX model in QDQ form, with its
// encodings (write_encodings).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"
#include "qfx/runtime/model.h"

namespace qfx::quant {

/// Options of export_onnx.
struct ExportOptions {
  /// Shape of each graph input, outermost first; -1 marks a dynamic dimension
  /// (the batch, typically): `{{-1, 3, 224, 224}}`.
  std::vector<std::vector<int64_t>> input_shapes;
  /// Names of the ONNX graph inputs and outputs (default: the placeholders'
  /// names, and "output" / "output_K").
  std::vector<std::string> input_names, output_names;
  /// Element type of each graph input: "float32" (default), "int64", "int32" or
  /// "bool" (token ids, masks: the ONNX input's elem_type).
  std::vector<std::string> input_dtypes;
  /// ONNX opset of the default domain (13..21). 14, as `qfx ptq` and `qfx qat` write:
  /// HardSwish is an ONNX op (a target's lookup table) from opset 14. A model with
  /// block-wise weights is written at opset 21 at least (the first whose
  /// DequantizeLinear has `block_size`, and whose types include INT4 / UINT4).
  int opset = 14;
  /// Export the float model instead: FakeQuantize / QuantDequant nodes become
  /// pass-throughs and weights stay float (batch norm folded). On a prepared
  /// model `ExportResult::observed` then lists where each FakeQuantize sat; this
  /// is the graph `calibrate` runs.
  bool float_model = false;
  /// Write each MatMul with block-wise 4-bit weights (a DequantizeLinear with
  /// `block_size`, a power of two >= 16, over INT4 / UINT4 codes) as ONNX Runtime's
  /// com.microsoft MatMulNBits instead (`output.block_weight_format: matmul_nbits`):
  /// the same codes and scales, packed as the op takes them, with the accuracy
  /// level below. Other weights keep the QDQ form. ONNX Runtime and qfx's runtime
  /// run it; ExportResult::matmul_nbits counts the nodes.
  bool matmul_nbits = false;
  /// MatMulNBits' `accuracy_level` (`output.matmul_nbits_accuracy_level`): 1, the
  /// activations float32 (W4A16); 4, the activations quantized to int8 per block on
  /// the fly and exact integer dot products (W4A8, ONNX Runtime's "int8 compute";
  /// docs/runtime.md defines what qfx's runtime computes). 0, 2 and 3 are ONNX
  /// Runtime's unset / fp16 / bf16 levels, which run in float32 on x86. export_onnx
  /// throws ArgumentError outside 0..4.
  int matmul_nbits_accuracy_level = 1;
  /// ONNX `metadata_props` to write (key -> value), e.g. runtime::kArithmeticMetadataKey
  /// with the target's Arithmetic::to_json(), which qfx's runtime then computes with.
  std::map<std::string, std::string> metadata;
  /// Write the target's arithmetic (runtime::kArithmeticMetadataKey) that prepare_fx /
  /// prepare_qat_fx recorded from the BackendConfig (a target whose arithmetic is not
  /// ONNX's: tflite_like, example_accel, a YAML with `arithmetic:`), unless `metadata`
  /// sets the key itself: the runtime then computes what the target computes, as
  /// `qfx ptq` writes it. `false` writes the model without it (the runtime and ONNX
  /// Runtime then compute ONNX's arithmetic): an explicit choice.
  bool target_arithmetic = true;
};

/// One quantized tensor of the converted model (what encodings.json lists).
struct Encoding {
  std::string tensor;           ///< ONNX value name (the QuantizeLinear input)
  std::string quantized;        ///< ONNX value name of the QuantizeLinear output (the int8 codes)
  std::string node;             ///< fx node it came from
  std::string dtype;            ///< "u8", "s8" or "s16"
  std::vector<float> scale;     ///< one per tensor, or one per channel
  std::vector<int32_t> zero_point;
  int64_t axis = -1;            ///< channel axis, -1 for per-tensor
  /// Weights: > 0 for block-wise qparams, one per block of `block_size` along the
  /// other axis of the 2-D weight; `scale` / `zero_point` are then [channel][block].
  int64_t block_size = 0;
  int64_t quant_min = 0, quant_max = 255;
  std::string algorithm;        ///< how the range was chosen ("minmax", "entropy", "fixed", ...)
  float observed_min = 0, observed_max = 0;
};

/// One FakeQuantize call of the prepared graph and the ONNX value it observes.
struct ObservedValue {
  std::string module;  ///< qualified name of the FakeQuantize module (shared ones appear once per call)
  std::string node;    ///< fx node whose output it observes
  std::string tensor;  ///< ONNX value name
};

/// What export_onnx produced.
struct ExportResult {
  std::vector<ObservedValue> observed; ///< float_model: every activation FakeQuantize call, in graph order
  std::vector<Encoding> encodings;
  /// Each quantized weight: `tensor` the DequantizeLinear's output, `quantized` its
  /// codes' initializer, `node` the layer; no algorithm or observed range.
  std::vector<Encoding> weight_encodings;
  std::vector<std::string> float_ops;  ///< "node (op): why it stays float"
  int quantized_weights = 0;           ///< conv / linear weights stored as int8
  int matmul_nbits = 0;                ///< MatMuls written as com.microsoft MatMulNBits (ExportOptions::matmul_nbits)
};

/// Converts a prepared GraphModule (prepare_fx after calibration, or
/// prepare_qat_fx after training) into a new GraphModule, as torch.ao's
/// `convert_fx(..., is_reference=True)`: the same graph (node names kept) where
/// - every FakeQuantize becomes a QuantDequant with its current qparams frozen
///   (one module per FakeQuantize path, so shared qparams stay shared);
/// - every FusedConvLinear becomes a QuantizedConvLinear: batch norm folded from
///   running statistics, the weight stored as integer codes (per-channel on the
///   output axis when so quantized), the bias as int32 codes with scale = input
///   scale x weight scale when its input is a per-tensor QuantDequant;
/// - other modules, tensors and wrapped calls are shared with `prepared`.
/// `prepared` is not modified (training can go on). The result is in eval mode
/// and runs in libtorch (`forward`), computing what the int8 model computes up to
/// float accumulation order; export_onnx writes it as the QDQ model.
std::shared_ptr<fx::GraphModule> convert_fx(fx::GraphModule& prepared);

/// Writes a converted GraphModule as an ONNX model at `path` (written to a
/// temporary name first and renamed: no half-written file):
/// - every QuantDequant becomes QuantizeLinear -> DequantizeLinear (sub-8-bit
///   ranges add a Clip to the range after DQ);
/// - QuantizedConvLinear modules become Conv / ConvTranspose / Gemm (or
///   MatMul + Add beyond rank 2) fed by DequantizeLinear of their s8 weight codes
///   and int32 bias codes, followed by their fused Relu / Clip(0, 6);
/// - other modules and aten ops become their ONNX ops; unquantized convs /
///   linears and unfused batch norms are listed in `float_ops`.
/// A prepared (not yet converted) model is converted first (`convert_fx`), unless
/// `options.float_model`. Follows the ONNX QDQ format (QuantizeLinear /
/// DequantizeLinear, opset >= 13).
/// Throws UnsupportedOpError naming the node for what ONNX cannot express here
/// (wrapped calls, unsupported aten ops), ConfigError for an opset outside
/// 13..21, IoError if `path` cannot be written.
ExportResult export_onnx(fx::GraphModule& gm, const std::string& path, const ExportOptions& options);

/// Like export_onnx, but returns the serialized ONNX ModelProto instead of
/// writing a file (for `runtime::Model::load_from_string`); fills `result` if
/// given. Same errors, minus IoError.
std::string export_onnx_bytes(fx::GraphModule& gm, const ExportOptions& options, ExportResult* result);

/// Writes `encodings.json` for an exported model: {"graph_hash", "backend",
/// "activations": {ONNX tensor: {node, dtype, scale[], zero_point[], axis, quant_min,
/// quant_max, algorithm, observed_min, observed_max}}, "weights": {ONNX tensor (the
/// DequantizeLinear output): {node, codes (the initializer), dtype, scale[],
/// zero_point[], axis (-1 per tensor), quant_min, quant_max, and block_size with scale
/// and zero_point [channel][block] for block-wise weights}} (conv and linear weights).
/// `graph_hash` is
/// `graph_hash(gm)` of the prepared model. With `int8` (the exported model loaded
/// on the runtime) it adds "arithmetic" (runtime::Arithmetic::to_json) and
/// "integer_ops": {node: {op, rescales: [{name, mode, multiplier[], and for
/// fixed_point / shift fixed_multiplier[], shift[], multiplier_bits}],
/// per_window_count, table[]}}, what each int8 op computes with. Written to a
/// temporary name and renamed; throws IoError if `path` cannot be written.
void write_encodings(const std::string& path, const ExportResult& result, const std::string& graph_hash,
                     const std::string& backend, const runtime::Model* int8 = nullptr);

}  // namespace qfx::quant
