// CUDA kernels of QuantizeLinear, DequantizeLinear, QLinearAdd / QLinearMul, the
// 8-bit code-to-code ops (QLut, QRelu, QClip: one 256-entry table each, computed by
// the reference kernel itself), int8 MaxPool and QLinearGlobalAveragePool.
#include "../ir.h"
#include "../reference/common.h"
#include "staging.h"

namespace qfx::runtime::cuda {
namespace {

// (De)QuantizeLinear's qparams from its constant inputs, and their per-channel layout
// over the input (ref::channel_layout, the reference kernels' own).
bool qdq_layout(const KernelRequest& r, ir::QInfo* q, DType fallback, int64_t* channels, int64_t* inner) {
  const ir::Node& n = r.node;
  if (r.consts.size() < 2 || !r.consts[1]) return r.decline("the scale is not a constant");
  if (const std::string why = ir::qdq_refusal(n); !why.empty()) return r.decline(why + " (the reference kernel runs it)");
  const Tensor* z = r.consts.size() > 2 && n.inputs.size() > 2 && !n.inputs[2].empty() ? r.consts[2] : nullptr;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !z) return r.decline("the zero point is not a constant");
  std::string why;
  auto got = ir::read_qparams(*r.consts[1], z, fallback, n.attr_i("axis", 1), &why);
  if (!got) return r.decline(why);
  *q = *got;
  ref::channel_layout(n, *q, r.in[0].shape, channels, inner);
  return true;
}

bool quantize(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  ir::QInfo q;
  int64_t C, inner;
  CodeType yt;
  if (r.in[0].dtype != DType::kFloat32) return r.decline("needs float32 input");
  if (!qdq_layout(r, &q, DType::kUInt8, &C, &inner)) return false;
  if (!code_type(q.dtype, &yt)) return r.decline("quantizes to 8 bits only");
  k->outputs = {{r.in[0].shape, q.dtype}};
  const ref::QRange range = ref::qrange(q.dtype);
  DeviceMem scale = upload(q.scale.data(), q.scale.size() * 4, "scale"), zp = upload(q.zero_point.data(), q.zero_point.size() * 4, "zero point");
  const int64_t total = ref::numel(r.in[0].shape);
  stage(r, k, {0}, [=](const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) {
    launch_quantize(static_cast<const float*>(in[0]), out[0], yt, total, inner, C, scale.as<float>(), zp.as<int32_t>(),
                    range.lo, range.hi, s);
  });
  return true;
}

bool dequantize(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  ir::QInfo q;
  int64_t C, inner;
  CodeType xt;
  if (!code_type(r.in[0].dtype, &xt)) return r.decline("dequantizes 8-bit codes only");
  if (!qdq_layout(r, &q, r.in[0].dtype, &C, &inner)) return false;
  k->outputs = {{r.in[0].shape, DType::kFloat32}};
  DeviceMem scale = upload(q.scale.data(), q.scale.size() * 4, "scale"), zp = upload(q.zero_point.data(), q.zero_point.size() * 4, "zero point");
  const int64_t total = ref::numel(r.in[0].shape);
  stage(r, k, {0}, [=](const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) {
    launch_dequantize(in[0], xt, static_cast<float*>(out[0]), total, inner, C, scale.as<float>(), zp.as<int32_t>(), s);
  });
  return true;
}

bool qbinary(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  const ir::Node& n = r.node;
  BinaryArgs a{};
  if (!code_type(r.in[0].dtype, &a.at) || !code_type(r.in[1].dtype, &a.bt) || !code_type(n.out_q.dtype, &a.yt))
    return r.decline("needs 8-bit inputs and output");
  const Shape o = ref::broadcast(n, r.in[0].shape, r.in[1].shape);
  if (o.size() > 8 || o.empty()) return r.decline("rank above 8");
  // Inputs of the output's shape and one layout are read element for element, channels
  // last included (then so is the output); broadcasting ones are read in NCHW.
  a.flat = r.in[0].shape == o && r.in[1].shape == o && r.in[0].nhwc == r.in[1].nhwc && (!r.in[0].nhwc || r.nhwc_out);
  const bool nhwc = a.flat && r.in[0].nhwc;
  k->accepts_nhwc = nhwc;
  a.rank = static_cast<int>(o.size());
  for (size_t d = 0; d < o.size(); ++d) a.out_dims[d] = o[d];
  broadcast_strides(o, r.in[0].shape, a.sa);
  broadcast_strides(o, r.in[1].shape, a.sb);
  a.n = ref::numel(o);
  a.add = n.op == "QLinearAdd";
  const ir::QInfo &qa = n.in_q.at(0), &qb = n.in_q.at(1), &qy = n.out_q;
  a.a_scale = qa.scale[0], a.b_scale = qb.scale[0], a.y_scale = qy.scale[0];
  a.za = qa.zero_point[0], a.zb = qb.zero_point[0];
  a.left_shift = n.arithmetic.elementwise_left_shift;
  const ref::QRange range = ref::act_range(n);
  std::vector<std::shared_ptr<DevRequant>> keep;
  if (n.arithmetic.elementwise == RequantMode::kFloat) {
    a.ro.mode = RequantMode::kFloat;
    a.ro.zp = qy.zero_point[0], a.ro.lo = range.lo, a.ro.hi = range.hi;
  } else {
    const ElementwiseRescales rs = elementwise_rescales(n);
    for (auto [dst, src] : {std::pair{&a.ra, &rs.a}, std::pair{&a.rb, &rs.b}, std::pair{&a.ro, &rs.out}}) {
      keep.push_back(std::make_shared<DevRequant>(dev_requant(*src, qy.zero_point[0], range.lo, range.hi, n.label())));
      *dst = keep.back()->args;
    }
  }
  k->outputs = {{o, qy.dtype, nhwc}};
  stage(r, k, {0, 1}, [a, keep](const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) {
    BinaryArgs b = a;
    b.a = in[0], b.b = in[1], b.y = out[0];
    launch_qbinary(b, s);
  });
  return true;
}

// An 8-bit code-to-code op as a table: the reference kernel of the node run once
// on all 256 codes, so the table is what the reference computes.
bool table_op(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  CodeType xt, yt;
  if (!code_type(r.in[0].dtype, &xt) || !code_type(r.node.out_q.dtype, &yt)) return r.decline("needs 8-bit input and output");
  const int lowest = xt == kU8 ? 0 : -128;
  Tensor codes({256}, r.in[0].dtype), table({256}, r.node.out_q.dtype);
  for (int c = 0; c < 256; ++c) ref::store_code(r.in[0].dtype, codes.raw(), c, lowest + c);
  std::vector<Meta> m256 = {Meta{{256}, r.in[0].dtype}};
  Kernel ref_k = make_kernel(r.node, m256, r.consts, "reference");
  ref_k.run({&codes}, {&table});
  const bool nhwc = r.in[0].nhwc && r.nhwc_out;  // elementwise: any layout, kept
  k->accepts_nhwc = nhwc;
  k->outputs = {{r.in[0].shape, r.node.out_q.dtype, nhwc}};
  DeviceMem t = upload(table.raw(), 256, r.node.label() + " table");
  const int64_t total = ref::numel(r.in[0].shape);
  const int offset = -lowest;
  stage(r, k, {0}, [=](const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) {
    launch_lut(in[0], out[0], total, offset, t.as<uint8_t>(), s);
  });
  return true;
}

bool maxpool(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  const ir::Node& n = r.node;
  PoolArgs a{};
  const bool f32 = r.in[0].dtype == DType::kFloat32;
  if (!f32 && !code_type(r.in[0].dtype, &a.t)) return r.decline("needs float32 or 8-bit input");
  if (r.in[0].shape.size() != 4) return r.decline("2-D pooling only");
  if (n.attr_i("storage_order", 0) != 0 || (n.outputs.size() > 1 && !n.outputs[1].empty()))
    return r.decline("storage_order or the Indices output");
  const ref::Geom g = ref::window_geom(n, r.in[0].shape, n.attr_ints("kernel_shape"), n.attr_i("ceil_mode", 0) != 0);
  a.N = g.N, a.C = g.C, a.H = g.H, a.W = g.W, a.kH = g.kH, a.kW = g.kW, a.oH = g.oH, a.oW = g.oW;
  a.sH = g.sH, a.sW = g.sW, a.dH = g.dH, a.dW = g.dW, a.pT = g.pT, a.pL = g.pL;
  a.nhwc = r.in[0].nhwc && r.nhwc_out;  // the output in the input's layout
  k->accepts_nhwc = a.nhwc;
  k->outputs = {{ref::spatial_out(r.in[0].shape, g.C, g), r.in[0].dtype, a.nhwc != 0}};
  stage(r, k, {0}, [a, f32](const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) {
    PoolArgs p = a;
    p.x = in[0], p.y = out[0];
    if (f32) launch_fmaxpool(p, s);
    else launch_qmaxpool(p, s);
  });
  return true;
}

bool qgap(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  const ir::Node& n = r.node;
  if (divides_average_pool(n)) return r.decline("the target divides the sum of codes (average_pool: divide; the reference runs it)");
  const Shape& x = r.in[0].shape;
  CodeType xt, yt;
  if (!code_type(r.in[0].dtype, &xt) || !code_type(n.out_q.dtype, &yt)) return r.decline("needs 8-bit input and output");
  if (x.size() < 3) return r.decline("needs [N, C, spatial...]");
  Shape out = {x[0], x[1]};
  for (size_t i = 2; i < x.size(); ++i) out.push_back(1);
  const int64_t planes = x[0] * x[1], hw = ref::inner_numel(x, 2);
  const float sx = n.in_q.at(0).scale[0], sy = n.out_q.scale[0];
  const ref::QRange range = ref::qrange(n.out_q.dtype);
  auto rq = std::make_shared<DevRequant>(dev_requant(Requantizer::pooling(n.arithmetic, {sx / (sy * static_cast<float>(hw))}, n.label()),
                                                     n.out_q.zero_point[0], range.lo, range.hi, n.label()));
  const int32_t zx = n.in_q.at(0).zero_point[0];
  // A channels-last input gives the same [N, C, 1, 1] output, plain.
  k->accepts_nhwc = r.in[0].nhwc;
  const int64_t channels = r.in[0].nhwc ? x[1] : 0;
  k->outputs = {{out, n.out_q.dtype}};
  stage(r, k, {0}, [=](const std::vector<const void*>& in, const std::vector<void*>& o, cudaStream_t s) {
    launch_qgap(in[0], xt, o[0], yt, planes, hw, channels, zx, rq->args, s);
  });
  return true;
}

// Shape-only ops (Flatten, Reshape, Squeeze, Unsqueeze, Identity): the bytes as they
// are, under the output shape the reference kernel computes, so a value between two
// device kernels stays on the device.
bool view_op(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  Kernel shaped = make_kernel(r.node, r.in, r.consts, "reference");
  if (shaped.outputs.size() != 1) return r.decline("more than one output");
  k->outputs = {{shaped.outputs[0].shape, shaped.outputs[0].dtype}};
  const size_t bytes = static_cast<size_t>(ref::numel(k->outputs[0].shape)) * dtype_size(k->outputs[0].dtype);
  if (bytes != static_cast<size_t>(ref::numel(r.in[0].shape)) * dtype_size(r.in[0].dtype)) return r.decline("not a view of its input");
  stage(r, k, {0}, [bytes](const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) {
    device_copy(out[0], in[0], bytes, s);
  });
  return true;
}

}  // namespace

void register_eltwise_kernels() {
  for (const char* op : {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity"}) add_kernel("cuda", op, "cuda", view_op);
  add_kernel("cuda", "QuantizeLinear", "cuda", quantize);
  add_kernel("cuda", "DequantizeLinear", "cuda", dequantize);
  for (const char* op : {"QLinearAdd", "QLinearMul"}) add_kernel("cuda", op, "cuda", qbinary);
  for (const char* op : {"QLut", "QRelu", "QClip"}) add_kernel("cuda", op, "cuda", table_op);
  add_kernel("cuda", "MaxPool", "cuda", maxpool);
  add_kernel("cuda", "QLinearGlobalAveragePool", "cuda", qgap);
}

}  // namespace qfx::runtime::cuda
