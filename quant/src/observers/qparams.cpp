#include "qfx/quant/qparams.h"

#include <ATen/ATen.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "qfx/error.h"

namespace qfx::quant {

const char* qdtype_name(QDType d) {
  switch (d) {
    case QDType::kUInt8: return "u8";
    case QDType::kInt8: return "s8";
    case QDType::kInt32: return "s32";
    case QDType::kInt16: return "s16";
  }
  return "?";
}

QDType parse_qdtype(const std::string& s) {
  if (s == "u8" || s == "uint8" || s == "quint8") return QDType::kUInt8;
  if (s == "s8" || s == "int8" || s == "qint8") return QDType::kInt8;
  if (s == "s16" || s == "int16" || s == "qint16") return QDType::kInt16;
  if (s == "s32" || s == "int32" || s == "qint32") return QDType::kInt32;
  throw ConfigError("unknown quantized dtype '" + s + "' (expected u8, s8, s16 or s32)");
}

const char* qscheme_name(QScheme s) { return s == QScheme::kAffine ? "affine" : "symmetric"; }

QuantSpec QuantSpec::make(QDType dtype, QScheme qscheme, int bits, bool narrow_range) {
  QuantSpec s;
  s.dtype = dtype;
  s.qscheme = qscheme;
  if (dtype == QDType::kInt32) {
    if (bits != 32 && bits != 8) throw ConfigError("s32 tensors are 32-bit");
    s.quant_min = std::numeric_limits<int32_t>::min();
    s.quant_max = std::numeric_limits<int32_t>::max();
    return s;
  }
  if (dtype == QDType::kInt16) {
    if (bits != 16 && bits != 8) throw ConfigError("s16 tensors are 16-bit, got bits " + std::to_string(bits));
    s.quant_min = -32768;
    s.quant_max = 32767;
    if (narrow_range) s.quant_min += 1;
    s.custom_range = narrow_range;
    return s;
  }
  if (bits < 2 || bits > 8) throw ConfigError("bits must be between 2 and 8, got " + std::to_string(bits));
  if (dtype == QDType::kUInt8) {
    s.quant_min = 0;
    s.quant_max = (int64_t{1} << bits) - 1;
  } else {
    s.quant_min = -(int64_t{1} << (bits - 1));
    s.quant_max = (int64_t{1} << (bits - 1)) - 1;
  }
  if (narrow_range) s.quant_min += 1;
  s.custom_range = bits != 8 || narrow_range;
  return s;
}

int QuantSpec::bits() const {
  const double levels = static_cast<double>(quant_max - quant_min + 1);
  return static_cast<int>(std::ceil(std::log2(levels)));
}

std::string QuantSpec::str() const {
  std::ostringstream os;
  os << qdtype_name(dtype) << ' ' << qscheme_name(qscheme) << " [" << quant_min << ',' << quant_max << ']';
  if (block_size > 0) os << " per-block(" << block_size << ')';
  else if (per_channel) os << " per-channel(axis " << ch_axis << ')';
  else os << " per-tensor";
  if (power_of_two) os << " pow2";
  return os.str();
}

namespace {

int64_t symmetric_zero_point(const QuantSpec& spec) {
  if (spec.dtype != QDType::kUInt8) return 0;
  // torch.ao: 128 for the default u8 range, (qmin + qmax) // 2 for a custom one.
  return spec.custom_range ? (spec.quant_min + spec.quant_max) / 2 : 128;
}

}  // namespace

QParams compute_qparams(const at::Tensor& min_in, const at::Tensor& max_in, const QuantSpec& spec) {
  if (min_in.sizes() != max_in.sizes()) throw ArgumentError("compute_qparams: min/max shapes differ");
  at::Tensor min_val = min_in.to(at::kFloat), max_val = max_in.to(at::kFloat);
  if (min_val.numel() > 0 && at::gt(min_val, max_val).any().item<bool>())
    throw ArgumentError("compute_qparams: min > max");
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  at::Tensor zeros = at::zeros(min_val.sizes(), opts);
  at::Tensor min_neg = at::minimum(min_val, zeros);
  at::Tensor max_pos = at::maximum(max_val, zeros);
  at::Tensor eps = at::full({}, kScaleEps, opts);
  at::Tensor scale;
  at::Tensor zp;
  const double qrange = static_cast<double>(spec.quant_max - spec.quant_min);
  if (spec.qscheme == QScheme::kSymmetric) {
    max_pos = at::maximum(-min_neg, max_pos);
    scale = max_pos / (qrange / 2);
    scale = at::maximum(scale, eps);
    zp = at::full(min_val.sizes(), symmetric_zero_point(spec), at::TensorOptions().dtype(at::kInt));
  } else {
    scale = (max_pos - min_neg) / qrange;
    scale = at::maximum(scale, eps);
    zp = spec.quant_min - at::round(min_neg / scale).to(at::kInt);
    zp = at::clamp(zp, spec.quant_min, spec.quant_max);
  }
  const bool bounded = spec.scale_min > 0 || std::isfinite(spec.scale_max);
  if (bounded) scale = at::clamp(scale, spec.scale_min > 0 ? spec.scale_min : kScaleEps, spec.scale_max);
  if (spec.power_of_two) scale = at::pow(2.0, at::ceil(at::log2(scale))).to(at::kFloat);
  if ((bounded || spec.power_of_two) && spec.qscheme == QScheme::kAffine) {
    zp = spec.quant_min - at::round(min_neg / scale).to(at::kInt);
    zp = at::clamp(zp, spec.quant_min, spec.quant_max);
  }
  QParams q;
  q.scale = scale.contiguous();
  q.zero_point = zp.to(at::kInt).contiguous();
  q.per_channel = spec.per_channel;
  q.axis = spec.ch_axis;
  q.quant_min = spec.quant_min;
  q.quant_max = spec.quant_max;
  q.dtype = spec.dtype;
  q.block_size = spec.block_size;
  return q;
}

float compute_qparams_scalar(float min_val, float max_val, const QuantSpec& spec, int64_t* zero_point) {
  float min_neg = std::min(min_val, 0.0f), max_pos = std::max(max_val, 0.0f);
  const float qrange = static_cast<float>(spec.quant_max - spec.quant_min);
  float scale;
  int64_t zp = 0;
  if (spec.qscheme == QScheme::kSymmetric) {
    scale = std::max(std::max(-min_neg, max_pos) / (qrange / 2), kScaleEps);
    zp = symmetric_zero_point(spec);
  } else {
    scale = std::max((max_pos - min_neg) / qrange, kScaleEps);
  }
  if (spec.scale_min > 0 || std::isfinite(spec.scale_max))
    scale = std::min(std::max(scale, static_cast<float>(std::max<double>(spec.scale_min, kScaleEps))),
                     static_cast<float>(spec.scale_max));
  if (spec.power_of_two) scale = std::exp2(std::ceil(std::log2(scale)));
  if (spec.qscheme == QScheme::kAffine) {
    zp = spec.quant_min - static_cast<int64_t>(std::nearbyint(min_neg / scale));
    zp = std::min(std::max(zp, spec.quant_min), spec.quant_max);
  }
  if (zero_point) *zero_point = zp;
  return scale;
}

}  // namespace qfx::quant
