// Reference kernels: QuantizeLinear and DequantizeLinear (per tensor and per channel),
// ONNX opset 13 semantics.
#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

// --- Quantize / Dequantize ----------------------------------------------------------------

ir::QInfo qinfo_of(const Node& n, const std::vector<const Tensor*>& consts, size_t scale_i, size_t zp_i, DType dt) {
  const Tensor& s = need_const(n, consts, scale_i, "scale");
  const Tensor* z = zp_i < n.inputs.size() && !n.inputs[zp_i].empty() ? &need_const(n, consts, zp_i, "zero_point") : nullptr;
  std::string why;
  auto q = ir::read_qparams(s, z, dt, n.attr_i("axis", 1), &why);
  if (!q) bad_shape(n, why);
  return *q;
}

Kernel quantize(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  ir::QInfo q = qinfo_of(n, consts, 1, 2, DType::kUInt8);
  if (q.dtype != DType::kUInt8 && q.dtype != DType::kInt8 && q.dtype != DType::kInt16)
    bad_shape(n, "QuantizeLinear to int32 is not supported");
  const Shape& x = in[0].shape;
  int64_t C, inner;
  channel_layout(n, q, x, &C, &inner);
  Kernel k;
  k.outputs = {{x, q.dtype}};
  const QRange r = qrange(q.dtype);
  k.run = [=](const In& i, const Out& o) {
    const float* xp = i[0]->data<float>();
    const int64_t t = i[0]->numel();
    for (int64_t p = 0; p < t; ++p) {
      const int64_t c = C == 1 ? 0 : (p / inner) % C;
      const int32_t v = quantize_value(xp[p], per(q.scale, c), per(q.zero_point, c), r.lo, r.hi);
      store_code(q.dtype, o[0]->raw(), p, v);
    }
  };
  return k;
}

Kernel dequantize(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  ir::QInfo q = qinfo_of(n, consts, 1, 2, in[0].dtype);
  const Shape& x = in[0].shape;
  int64_t C, inner;
  channel_layout(n, q, x, &C, &inner);
  Kernel k;
  k.outputs = {{x, DType::kFloat32}};
  k.run = [=](const In& i, const Out& o) {
    float* y = o[0]->data<float>();
    const int64_t t = i[0]->numel();
    const bool i32 = i[0]->dtype() == DType::kInt32;
    for (int64_t p = 0; p < t; ++p) {
      const int64_t c = C == 1 ? 0 : (p / inner) % C;
      const int32_t v = i32 ? i[0]->data<int32_t>()[p] : qload(*i[0], p);
      // In int64: an int32 input minus an int32 zero point can leave int32 (UBSan found
      // 704 - INT32_MIN); the exact difference, then float, as the spec's real arithmetic.
      y[p] = static_cast<float>(static_cast<int64_t>(v) - static_cast<int64_t>(per(q.zero_point, c))) * per(q.scale, c);
    }
  };
  return k;
}


}  // namespace

void register_reference_quantize() {
  add_reference({"QuantizeLinear"}, quantize);
  add_reference({"DequantizeLinear"}, dequantize);
}

}  // namespace qfx::runtime
