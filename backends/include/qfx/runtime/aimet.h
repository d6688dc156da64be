// Writing a converted int8 QDQ model in Qualcomm AIMET's form: a float ONNX model and
// an encodings file that says how each of its tensors is quantized (what AIMET's
// QuantSim `load_encodings_to_sim` and QNN's `qnn-onnx-converter
// --quantization_overrides` read).
#pragma once

#include <string>

namespace qfx::runtime {

/// Options of write_aimet.
struct AimetOptions {
  /// The encodings format: "1.0.0" (`activation_encodings` and `param_encodings`
  /// lists; entries with dtype "INT", bw, is_sym, scale, offset, enc_type) or "2.0.0"
  /// (one `encodings` list; entries with output_dtype, y_scale, y_zero_point, axis,
  /// block_size as ONNX's QuantizeLinear names them).
  std::string version = "1.0.0";
  /// How errors name the model (default: the ONNX path).
  std::string what;
};

/// What write_aimet wrote.
struct AimetSummary {
  int activations = 0;  ///< activation encodings (one per QuantizeLinear / DequantizeLinear pair)
  int params = 0;       ///< weight encodings (int32 biases are dequantized and not listed)
};

/// Writes the int8 QDQ ONNX model at `onnx_path` (as `qfx ptq` writes it) as AIMET's
/// pair, each file atomically: `model_path` the same graph in float (every activation
/// QuantizeLinear -> DequantizeLinear pair removed, its consumers reading the float
/// value; every constant DequantizeLinear replaced by its float result, so weights
/// and biases hold exactly the values the int8 model computes with) and
/// `encodings_path` the removed pairs' and weights' qparams keyed by the float
/// model's tensor names (activations: the QuantizeLinear's input; weights: the
/// DequantizeLinear's output). Bit widths and signedness are the codes' ONNX element
/// types (int8 `bw` 8 signed, uint8, int16, int4 ...), the range ONNX's
/// QuantizeLinear saturates to; a signed range with non-zero zero points is written
/// as the unsigned range of the same grid in 1.0.0 (its `is_sym` means a zero
/// offset there).
/// Per-channel weights carry their axis (2.0.0), block-wise ones their block size.
/// Throws IoError for an unreadable model (external data included) or an unwritable
/// path, UnsupportedOpError naming the node for an op AIMET's float graph cannot
/// hold (a custom-domain op such as com.microsoft.MatMulNBits, a QuantizeLinear
/// whose codes are read by anything but a DequantizeLinear), ConfigError for an
/// unknown version.
AimetSummary write_aimet(const std::string& onnx_path, const std::string& model_path, const std::string& encodings_path,
                         const AimetOptions& options = {});

}  // namespace qfx::runtime
