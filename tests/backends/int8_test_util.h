// Helpers of the int8 kernel tests: random integer codes and reading them back.
#pragma once

#include <random>
#include <string>

#include "qfx/runtime/kernel.h"

namespace qfx::runtime::test {

/// A tensor of dtype `dt` (kInt8 or kUInt8) and shape `s` with codes uniform in [lo, hi].
inline Tensor random_codes(const Shape& s, DType dt, int lo, int hi, std::mt19937& rng) {
  Tensor t(s, dt);
  std::uniform_int_distribution<int> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::kUInt8) t.data<uint8_t>()[i] = static_cast<uint8_t>(d(rng));
    else t.data<int8_t>()[i] = static_cast<int8_t>(d(rng));
  }
  return t;
}

/// The same over the dtype's whole range.
inline Tensor random_codes(const Shape& s, DType dt, std::mt19937& rng) {
  return dt == DType::kUInt8 ? random_codes(s, dt, 0, 255, rng) : random_codes(s, dt, -128, 127, rng);
}

/// A 2-D convolution node `op` ("Conv" or "QLinearConv") named `name` with inputs x, w, b,
/// `group`, square `stride` and the same `pad` on all four sides (no qparams set).
inline ir::Node conv_node(const std::string& op, const std::string& name, int64_t group, int64_t stride, int64_t pad) {
  ir::Node n;
  n.op = op;
  n.name = name;
  n.inputs = {"x", "w", "b"};
  n.attrs["group"].i = group;
  n.attrs["strides"].ints = {stride, stride};
  n.attrs["pads"].ints = {pad, pad, pad, pad};
  return n;
}

/// Element i of an int8 / uint8 tensor.
inline int32_t code_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kUInt8 ? t.data<uint8_t>()[i] : t.data<int8_t>()[i];
}

}  // namespace qfx::runtime::test
