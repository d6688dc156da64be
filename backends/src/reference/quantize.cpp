// Reference kernels: QuantizeLinear and DequantizeLinear, ONNX opset 13..21 semantics
// (onnx.ai/onnx/operators): per tensor, per axis, and per block (opset 21:
// `block_size` B > 0 along `axis`, the scale (and zero point) shaped as x with
// ceil(D / B) at the axis, the last block possibly short); QuantizeLinear to the
// type of its zero point or `output_dtype` (INT4, UINT4, INT8, UINT8, INT16, UINT16),
// rounding half to even and saturating to that type's range.
#include "common.h"
#include "dequantize.h"

namespace qfx::runtime {
namespace {
using namespace ref;

// Which scale / zero point element each element of x reads: per tensor, per axis
// (index along the axis), or per block (x's index with the axis coordinate divided
// by the block size, in the scale's row-major layout).
struct ScaleMap {
  int64_t dim = 1, inner = 1, block = 0, blocks = 1;
  bool per_axis = false;
  int64_t at(int64_t p) const {
    if (!per_axis && block == 0) return 0;
    const int64_t c = (p / inner) % dim;
    if (block == 0) return c;
    return ((p / (dim * inner)) * blocks + c / block) * inner + p % inner;
  }
};

// The blocked layout of node `n` over x: the scale's shape (and the zero point's,
// when given) must be x's with ceil(D / block_size) along the axis. Throws DataError
// naming the node otherwise.
ScaleMap blocked_map(const Node& n, const Shape& x, const Tensor& scale, const Tensor* zp, int64_t block) {
  if (x.empty()) bad_shape(n, "block_size needs an input of rank 1 or more");
  const int64_t axis = norm_axis(n, n.attr_i("axis", 1), x.size());
  ScaleMap m;
  m.dim = x[static_cast<size_t>(axis)];
  m.inner = inner_numel(x, static_cast<size_t>(axis) + 1);
  m.block = block;
  m.blocks = (m.dim + block - 1) / block;
  Shape want = x;
  want[static_cast<size_t>(axis)] = m.blocks;
  if (scale.shape() != want)
    bad_shape(n, "block_size " + std::to_string(block) + " along axis " + std::to_string(axis) + " of input " + shape_str(x) +
                     " needs a scale of shape " + shape_str(want) + ", got " + shape_str(scale.shape()));
  if (zp && zp->shape() != want)
    bad_shape(n, "the zero point's shape " + shape_str(zp->shape()) + " differs from the scale's " + shape_str(want));
  return m;
}

// qparams of node `n` and how they map over input shape `x`; `dt`: the code dtype
// when the node has no zero point.
ScaleMap qparams_of(const Node& n, const std::vector<const Tensor*>& consts, const Shape& x, DType dt, ir::QInfo* q) {
  const Tensor& s = need_const(n, consts, 1, "scale");
  const Tensor* z = n.inputs.size() > 2 && !n.inputs[2].empty() ? &need_const(n, consts, 2, "zero_point") : nullptr;
  std::string why;
  auto got = ir::read_qparams(s, z, dt, n.attr_i("axis", 1), &why);
  if (!got) bad_shape(n, why);
  *q = *got;
  const int64_t block = n.attr_i("block_size", 0);
  if (block < 0) bad_shape(n, "block_size " + std::to_string(block) + " is negative");
  if (block > 0) return blocked_map(n, x, s, z, block);
  ScaleMap m;
  channel_layout(n, *q, x, &m.dim, &m.inner);
  m.per_axis = q->per_channel();
  return m;
}

// The codes QuantizeLinear writes: their storage dtype and range, from output_dtype
// (set by the model, or by the loader from a 4-bit / uint16 zero point) or else the
// zero point's dtype (uint8 without one).
struct Codes {
  DType dtype;
  int32_t lo, hi;
};

DType output_storage(const Node& n) {
  const int64_t t = n.attr_i("output_dtype", 0);
  Codes c{DType::kUInt8, 0, 255};
  if (t != 0 && (t == 6 || !ir::onnx_integer_type(t, &c.dtype, &c.lo, &c.hi)))
    unsupported(n, "output_dtype " + std::to_string(t) + " (int4, uint4, int8, uint8, int16 and uint16 are supported)");
  return c.dtype;
}

Codes output_codes(const Node& n, const ir::QInfo& q) {
  Codes c{q.dtype, 0, 0};
  if (const int64_t t = n.attr_i("output_dtype", 0); t != 0) {
    DType storage;
    ir::onnx_integer_type(t, &storage, &c.lo, &c.hi);  // checked by output_storage
    if (storage != q.dtype)
      bad_shape(n, std::string("the zero point is ") + dtype_name(q.dtype) + " but output_dtype " + std::to_string(t) +
                       " is stored as " + dtype_name(storage));
    return c;
  }
  if (q.dtype != DType::kUInt8 && q.dtype != DType::kInt8 && q.dtype != DType::kInt16)
    bad_shape(n, "QuantizeLinear to int32 is not supported");
  const QRange r = qrange(q.dtype);
  return {q.dtype, r.lo, r.hi};
}

void store(DType d, void* dst, int64_t i, int32_t v) {
  if (d == DType::kInt32) static_cast<int32_t*>(dst)[i] = v;
  else store_code(d, dst, i, v);
}

Kernel quantize(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape& x = in[0].shape;
  ir::QInfo q;
  const ScaleMap m = qparams_of(n, consts, x, output_storage(n), &q);
  const Codes c = output_codes(n, q);
  Kernel k;
  k.outputs = {{x, c.dtype}};
  k.run = [=](const In& i, const Out& o) {
    const float* xp = i[0]->data<float>();
    const int64_t t = i[0]->numel();
    for (int64_t p = 0; p < t; ++p) {
      const int64_t s = m.at(p);
      store(c.dtype, o[0]->raw(), p, quantize_value(xp[p], q.scale[static_cast<size_t>(s)], q.zero_point[static_cast<size_t>(s)], c.lo, c.hi));
    }
  };
  return k;
}

Kernel dequantize(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape& x = in[0].shape;
  ir::QInfo q;
  const ScaleMap m = qparams_of(n, consts, x, in[0].dtype, &q);
  Kernel k;
  k.outputs = {{x, DType::kFloat32}};
  k.run = [=](const In& i, const Out& o) {
    float* y = o[0]->data<float>();
    const int64_t t = i[0]->numel();
    const bool i32 = i[0]->dtype() == DType::kInt32;
    for (int64_t p = 0; p < t; ++p) {
      const size_t s = static_cast<size_t>(m.at(p));
      const int32_t v = i32 ? i[0]->data<int32_t>()[p] : qload(*i[0], p);
      // In int64: an int32 input minus an int32 zero point can leave int32 (UBSan found
      // 704 - INT32_MIN); the exact difference, then float, as the spec's real arithmetic.
      y[p] = static_cast<float>(static_cast<int64_t>(v) - static_cast<int64_t>(q.zero_point[s])) * q.scale[s];
    }
  };
  return k;
}

}  // namespace

Tensor dequantize_constant(const ir::Node& n, const Tensor& x, const std::vector<const Tensor*>& consts) {
  const Kernel k = dequantize(n, {Meta{x.shape(), x.dtype()}}, consts);
  Tensor y(x.shape(), DType::kFloat32);
  k.run({&x}, {&y});
  return y;
}

void register_reference_quantize() {
  add_reference({"QuantizeLinear"}, quantize);
  add_reference({"DequantizeLinear"}, dequantize);
}

}  // namespace qfx::runtime
