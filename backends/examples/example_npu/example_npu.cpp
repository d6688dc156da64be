// An example runtime plug-in: the backend of a made-up NPU ("example_npu").
// It registers its own kernel for int8 QLinearAdd (per-tensor qparams, operands
// of the same shape, optionally fused Relu) and inherits the reference kernels
// for every other op. Build it as a shared library linked to qfx::qfx_runtime
// and load it with ModelOptions::plugins, `runtime.plugins` in a config, or
// `qfx run --plugin libqfx_example_npu.so --backend example_npu`.
//
// Copy this file to start a vendor backend: register_backend names it and its
// parent; register_kernel adds an implementation per op; a factory declines
// (r.decline("why")) what the chip cannot run, and the next implementation runs.
#include <algorithm>
#include <cstdint>

#include "qfx/runtime/registry.h"

namespace {

using qfx::runtime::DType;
using qfx::runtime::Kernel;
using qfx::runtime::KernelRequest;
using qfx::runtime::Tensor;

// y = saturate(round_half_even((sa * (a - za) + sb * (b - zb)) / sy) + zy), the
// arithmetic of the reference QLinearAdd, on the NPU's 8-bit lanes.
template <typename TA, typename TB, typename TY>
void qadd(const TA* a, const TB* b, TY* y, int64_t n, float sa, int32_t za, float sb, int32_t zb, float sy, int32_t zy,
          int32_t lo, int32_t hi) {
  for (int64_t i = 0; i < n; ++i) {
    const float r = sa * static_cast<float>(a[i] - za) + sb * static_cast<float>(b[i] - zb);
    y[i] = static_cast<TY>(qfx::runtime::quantize_value(r, sy, zy, lo, hi));
  }
}

bool npu_qlinear_add(const KernelRequest& r, Kernel* k) {
  const auto& n = r.node;
  if (!r.node.arithmetic.is_float()) return r.decline("the NPU's adder computes ONNX's float rescale only");
  if (r.in.size() != 2 || r.in[0].shape != r.in[1].shape) return r.decline("the NPU adds operands of one shape only");
  if (r.in[0].dtype != DType::kUInt8 || r.in[1].dtype != DType::kUInt8 || n.out_q.dtype != DType::kUInt8)
    return r.decline("the NPU's adder takes u8 operands");
  if (n.in_q.size() != 2 || n.in_q[0].per_channel() || n.in_q[1].per_channel()) return r.decline("per-channel qparams");
  if (!n.fused_act.empty() && n.fused_act != "Relu") return r.decline("fused " + n.fused_act + " (Relu only)");
  const float sa = n.in_q[0].scale[0], sb = n.in_q[1].scale[0], sy = n.out_q.scale[0];
  const int32_t za = n.in_q[0].zero_point[0], zb = n.in_q[1].zero_point[0], zy = n.out_q.zero_point[0];
  const int32_t lo = n.fused_act == "Relu" ? std::max(0, zy) : 0, hi = 255;
  k->outputs = {{r.in[0].shape, DType::kUInt8}};
  k->run = [=](const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) {
    qadd(in[0]->data<uint8_t>(), in[1]->data<uint8_t>(), out[0]->data<uint8_t>(), in[0]->numel(), sa, za, sb, zb, sy, zy,
         lo, hi);
  };
  return true;
}

}  // namespace

QFX_RUNTIME_PLUGIN {
  qfx::runtime::register_backend({"example_npu", "reference", "example NPU plug-in: its own QLinearAdd, reference kernels for the rest", {}});
  qfx::runtime::register_kernel("example_npu", "QLinearAdd", "example_npu", npu_qlinear_add);
}
