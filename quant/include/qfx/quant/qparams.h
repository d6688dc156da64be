// Quantization parameters: dtypes, schemes and the (scale, zero_point) formulas of
// torch.ao.quantization's observers (`_calculate_qparams`), plus the scale
// constraints custom accelerators impose (power-of-two scales, bounds).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <limits>
#include <string>

namespace qfx::quant {

/// Integer container types of quantized tensors. kInt16 is for activations of
/// 16x8 layers (int16 activations, int8 weights, as TFLite's 16x8 scheme).
enum class QDType { kUInt8, kInt8, kInt32, kInt16 };
/// "u8", "s8", "s32", "s16".
const char* qdtype_name(QDType d);
/// Parses "u8"/"uint8"/"quint8", "s8"/"int8"/"qint8", "s16"/"int16"/"qint16",
/// "s32"/"int32"/"qint32".
/// Throws qfx::ConfigError for anything else.
QDType parse_qdtype(const std::string& s);

/// Affine (zero_point anywhere in range) or symmetric (zero_point at the middle of
/// the range: 0 for s8, 128 for u8), as torch.per_tensor_affine / _symmetric.
enum class QScheme { kAffine, kSymmetric };
/// "affine" / "symmetric".
const char* qscheme_name(QScheme s);

/// How one tensor is quantized: the target of an observer or fake quantize.
///
/// quant_min/quant_max follow torch.ao: bit widths below 8 are expressed by a
/// narrower range inside an 8-bit container (4-bit s8: -8..7). Scales are float32
/// (units of the real value per integer step); zero points are integers in
/// [quant_min, quant_max].
struct QuantSpec {
  QDType dtype = QDType::kUInt8;
  QScheme qscheme = QScheme::kAffine;
  int64_t quant_min = 0;    ///< smallest integer value
  int64_t quant_max = 255;  ///< largest integer value
  bool per_channel = false; ///< one (scale, zero_point) per slice along `ch_axis`
  int64_t ch_axis = 0;      ///< channel axis when per_channel (0 for conv/linear weights)
  bool power_of_two = false;  ///< scales rounded *up* to 2^k (shift-based requantization)
  double scale_min = 0.0;   ///< lower bound on scale (besides float32 eps, torch.ao's floor)
  double scale_max = std::numeric_limits<double>::infinity();  ///< upper bound on scale
  bool custom_range = false;  ///< quant range narrower than the dtype's (bits < 8 or narrow range)
  /// Block-wise (per_channel with block_size > 0): one (scale, zero_point) per block of
  /// `block_size` consecutive elements along axis 1 of a 2-D [C, K] weight, for each
  /// of the C slices along `ch_axis` 0; the last block of a row may be short (K not a
  /// multiple). The form of ONNX DequantizeLinear-21's `block_size` and of GPTQ / AWQ
  /// group-wise weights. 0: not block-wise.
  int64_t block_size = 0;

  /// A spec of `bits` bits (2..8; 16 for s16, whose `bits` argument 8 is read as
  /// the default 16; 32 only for s32) in `dtype`'s container: u8 -> [0, 2^bits - 1],
  /// s8 -> [-2^(bits-1), 2^(bits-1) - 1], s16 -> [-32768, 32767]; `narrow_range`
  /// drops the most negative value (s8: -127..127), as TensorRT's symmetric int8.
  /// Throws qfx::ConfigError for bits outside 2..8 (or a bad s16 / s32 request).
  static QuantSpec make(QDType dtype, QScheme qscheme, int bits = 8, bool narrow_range = false);
  /// Number of bits the range spans (ceil(log2(quant_max - quant_min + 1))).
  int bits() const;
  /// One line: "s8 symmetric [-128,127] per-channel(axis 0) pow2".
  std::string str() const;
};

/// (scale, zero_point) for one tensor: per-tensor (0-dim tensors) or per-channel
/// (1-D tensors of length C along `axis`). scale: float32; zero_point: int32 (the
/// dtype torch's fake_quantize_per_channel_affine requires).
struct QParams {
  at::Tensor scale;
  at::Tensor zero_point;
  bool per_channel = false;
  int64_t axis = 0;
  int64_t quant_min = 0;
  int64_t quant_max = 255;
  QDType dtype = QDType::kUInt8;
  /// > 0: block-wise (see QuantSpec::block_size; `per_channel` is true, `axis` 0):
  /// scale and zero_point are flat [C * ceil(K / block_size)], row-major over
  /// (channel, block) of the [C, K] weight they quantize.
  int64_t block_size = 0;
};

/// float32 machine epsilon: the scale floor torch.ao observers use (all-zero or
/// constant tensors still get a valid, positive scale).
constexpr float kScaleEps = std::numeric_limits<float>::epsilon();

/// qparams covering [min_val, max_val] (extended to include 0), with the exact
/// float32 arithmetic of torch.ao's `UniformQuantizationObserverBase._calculate_qparams`
/// (affine: scale = (max-min)/(qmax-qmin), zp = qmin - round_half_even(min/scale);
/// symmetric: scale = max(|min|,|max|) / ((qmax-qmin)/2), zp = 0 for s8 and 128 for
/// u8), then `spec`'s constraints: scale clamped to [scale_min, scale_max], rounded
/// up to a power of two if asked (zero_point recomputed for affine).
/// min_val/max_val: 0-dim (per-tensor) or [C] (per-channel) float tensors.
/// Throws ArgumentError if min > max anywhere or the shapes differ.
QParams compute_qparams(const at::Tensor& min_val, const at::Tensor& max_val, const QuantSpec& spec);

/// Scalar form for search loops (calibration algorithms): same formulas in float32.
/// Returns scale and writes zero_point.
float compute_qparams_scalar(float min_val, float max_val, const QuantSpec& spec, int64_t* zero_point);

/// Fake-quantizes one value: clamp(round_half_even(x / scale) + zp, qmin, qmax) - zp, times scale.
inline float fake_quant_scalar(float x, float scale, int64_t zp, int64_t qmin, int64_t qmax) {
  float q = __builtin_nearbyintf(x / scale) + static_cast<float>(zp);
  q = q < qmin ? static_cast<float>(qmin) : (q > qmax ? static_cast<float>(qmax) : q);
  return (q - static_cast<float>(zp)) * scale;
}

}  // namespace qfx::quant
