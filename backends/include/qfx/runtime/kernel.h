// What a kernel implementation sees and returns: the node it runs (ONNX op, or a
// qfx int8 op after QDQ matching, with its qparams), the concrete input shapes,
// and the Kernel it builds. Public so that plug-in backends can write kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "qfx/runtime/arithmetic.h"
#include "qfx/runtime/tensor.h"

namespace qfx::runtime {

namespace ir {

/// One ONNX attribute (ONNX AttributeProto: INT, FLOAT, INTS, FLOATS, STRING, TENSOR).
struct Attr {
  enum class Kind { kInt, kFloat, kInts, kFloats, kString, kTensor } kind = Kind::kInt;
  int64_t i = 0;               ///< kInt
  float f = 0;                 ///< kFloat
  std::vector<int64_t> ints;   ///< kInts
  std::vector<float> floats;   ///< kFloats
  std::string s;               ///< kString
  Tensor t;                    ///< kTensor
};

/// Quantization parameters of one int8 value: per tensor (one scale), or per
/// channel along `axis` (one scale and zero point per channel), as ONNX
/// QuantizeLinear / DequantizeLinear define them: real = scale * (q - zero_point).
struct QInfo {
  std::vector<float> scale;          ///< one per tensor, or one per channel along `axis`
  std::vector<int32_t> zero_point;   ///< as many as `scale`, in the dtype's range
  DType dtype = DType::kUInt8;  ///< kUInt8 or kInt8 (kInt32 for biases)
  int64_t axis = 1;
  /// More than one scale: per-channel qparams.
  bool per_channel() const { return scale.size() > 1; }
};

/// One operation of the runtime graph. `op` is the ONNX op type (default domain),
/// or, after QDQ matching, one of the int8 ops named as ONNX Runtime names them:
/// "QLinearConv", "QGemm", "QLinearMatMul", "QLinearAdd", "QLinearMul",
/// "QLinearAveragePool", "QLinearGlobalAveragePool", "QLinearConcat", plus qfx's
/// "QRelu" / "QClip"; int8 MaxPool and shape ops keep their ONNX names and run on
/// integer codes. Int8 ops take the integer codes as inputs (no DequantizeLinear);
/// their qparams are in `in_q` (one per quantized input: x, then w for conv/gemm)
/// and `out_q`, and a Relu/Clip that followed them is fused (`fused_act`).
struct Node {
  std::string op;                    ///< ONNX op type or qfx int8 op (above)
  std::string name;                  ///< unique node name (ONNX NodeProto.name, or made up)
  std::vector<std::string> inputs;   ///< value names; "" for an omitted optional input
  std::vector<std::string> outputs;
  std::map<std::string, Attr> attrs;  ///< ONNX attributes by name
  std::vector<QInfo> in_q;           ///< int8 ops: qparams of the quantized inputs
  QInfo out_q;                       ///< int8 ops: qparams of the output
  std::string fused_act;             ///< "", "Relu" or "Clip" (bounds clip_lo/clip_hi, real units)
  float clip_lo = 0, clip_hi = 0;
  /// The target's integer arithmetic every int8 op computes with (the model's
  /// `qfx.arithmetic` metadata, or ModelOptions::arithmetic); default: ONNX's.
  /// A kernel that cannot compute it exactly must decline (plug-ins included).
  Arithmetic arithmetic;

  /// True if attribute `a` is set.
  bool has(const std::string& a) const { return attrs.count(a) != 0; }
  /// Attribute values, or `def` when absent.
  int64_t attr_i(const std::string& a, int64_t def) const;
  float attr_f(const std::string& a, float def) const;
  std::vector<int64_t> attr_ints(const std::string& a, std::vector<int64_t> def = {}) const;
  std::string attr_s(const std::string& a, const std::string& def = "") const;
  /// "Conv 'conv1'" for messages.
  std::string label() const { return op + " '" + name + "'"; }
  /// The clamp of the fused activation in real units, as every backend applies it:
  /// [0, +inf) for Relu, [clip_lo, clip_hi] for Clip, (-inf, +inf) for none. (Its
  /// form on output codes is the reference's act_range.)
  std::pair<float, float> act_bounds() const {
    const float inf = std::numeric_limits<float>::infinity();
    if (fused_act == "Relu") return {0.0f, inf};
    if (fused_act == "Clip") return {clip_lo, clip_hi};
    return {-inf, inf};
  }
};

}  // namespace ir

/// A logical shape (dimensions, outermost first; NCHW for 4-D values).
using Shape = std::vector<int64_t>;

/// Shape, dtype and layout of one value.
struct Meta {
  Shape shape;             ///< logical shape (NCHW for 4-D)
  DType dtype = DType::kFloat32;
  bool nhwc = false;       ///< 4-D value stored channels last ([N, H, W, C] in memory)
};

/// A kernel for one node at fixed input shapes: built once per plan, then run many
/// times, from one thread at a time. `run` must not allocate if it can avoid it
/// (buffers are made when the kernel is built).
struct Kernel {
  std::vector<Meta> outputs;  ///< output shapes, dtypes and layouts
  /// Which implementation built it ("reference", "onednn", "simd", a plug-in's
  /// name); set by the registry from the registration.
  std::string impl = "reference";
  /// True if `run` takes its inputs in the layouts their Metas say (channels last
  /// included); otherwise the planner hands it plain copies of channels-last inputs.
  bool accepts_nhwc = false;
  /// True for a kernel of a backend with device memory (BackendInfo::device_alloc)
  /// that can read inputs and write outputs in that memory. The planner keeps a
  /// value on the device when its producer and every consumer are such kernels and
  /// it is not a graph output, and tells each kernel which of its inputs and outputs
  /// are device-resident through `place` (called once per plan, before any run):
  /// their Tensors' raw() are device pointers.
  bool device_io = false;
  std::function<void(const std::vector<bool>& in_device, const std::vector<bool>& out_device)> place;
  /// Computes outputs from inputs (nullptr for an omitted optional input).
  std::function<void(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out)> run;
};

/// What a kernel factory is asked to build: node `node` at input metas `in`;
/// `consts[i]` is the value of input i when it is a constant (initializer or
/// folded at plan time), nullptr otherwise. `nhwc_out`: every consumer of the
/// output can take channels last, so a kernel that can may write it so (and says
/// so in `Kernel::outputs[i].nhwc`); without it outputs must be plain.
struct KernelRequest {
  const ir::Node& node;                      ///< the node to run
  const std::vector<Meta>& in;               ///< its inputs' shapes, dtypes and layouts
  const std::vector<const Tensor*>& consts;  ///< constant inputs, nullptr for computed ones
  bool nhwc_out = false;                     ///< the output may be written channels last
  /// Why the factory declined (set through `decline`).
  mutable std::string why;
  /// Records `reason` and returns false: `return r.decline("needs 4-D input");`.
  bool decline(std::string reason) const {
    why = std::move(reason);
    return false;
  }
};

/// A kernel implementation's factory. Returns true with `*k` filled for the
/// request's concrete shapes, or false after `r.decline(reason)` when this
/// implementation cannot run the configuration (the next implementation is
/// tried). May throw UnsupportedOpError / DataError for a node that is invalid
/// for every implementation (the reference kernels do).
using KernelFactory = std::function<bool(const KernelRequest& r, Kernel* k)>;

/// The last step of QuantizeLinear and of requantization (hd::saturate_code,
/// arith_hd.h): an already rounded float `q` (NaN counts as 0) plus `zp`, saturated
/// to [qmin, qmax].
inline int32_t saturate_code(float q, int32_t zp, int32_t qmin, int32_t qmax) {
  return hd::saturate_code(q, zp, qmin, qmax);
}

/// ONNX QuantizeLinear arithmetic: saturate(round_half_even(x / scale) + zp); NaN
/// quantizes to the zero point (hd::quantize_value, shared with the CUDA kernels).
inline int32_t quantize_value(float x, float scale, int32_t zp, int32_t qmin, int32_t qmax) {
  return hd::quantize_value(x, scale, zp, qmin, qmax);
}

/// Requantization of an int32 accumulator with multiplier m = in_scale * w_scale / out_scale:
/// saturate(round_half_even(float(acc) * m) + zp), the reference integer arithmetic.
inline int32_t requantize(int32_t acc, float m, int32_t zp, int32_t qmin, int32_t qmax) {
  return hd::saturate_code(hd::round_half_even(static_cast<float>(acc) * m), zp, qmin, qmax);
}

}  // namespace qfx::runtime
