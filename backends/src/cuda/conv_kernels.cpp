// CUDA kernels of QLinearConv, QGemm and QLinearMatMul with a constant weight:
// group-1 layers with symmetric int8 weights as im2col + cuBLASLt int8 GEMM + a
// requantizing epilogue, everything else as a direct kernel. Both sum exactly in
// int32 and requantize with the shared arithmetic, so results equal the reference's.
#include "../reference/common.h"
#include "gemm_lt.h"
#include "staging.h"

namespace qfx::runtime::cuda {
namespace {

using ref::Geom;

// A layer as a convolution: geometry, weight codes [M, C/group·kH·kW] as a host tensor,
// int32 bias, per-channel weight zero points, requantization, and the layouts of its
// input and output (channels last or NCHW).
struct Layer {
  Geom g{};
  Tensor w;
  std::vector<int32_t> bias, wz;
  std::vector<float> mult;
  ir::QInfo xq, wq, yq;
  bool x_nhwc = false, y_nhwc = false;
};

ConvArgs conv_args(const Layer& l, CodeType xt, CodeType wt, CodeType yt) {
  const Geom& g = l.g;
  ConvArgs a{};
  set_geometry(&a, g);
  a.xt = xt, a.wt = wt, a.yt = yt;
  a.x_nhwc = l.x_nhwc, a.y_nhwc = l.y_nhwc;
  a.zx = l.xq.zero_point[0];
  return a;
}

// The GEMM path's constant operands: weights padded to kp columns, in the im2col
// rows' column order ((c, kh, kw) for NCHW input, (kh, kw, c) for channels last), and
// corr[m] = bias[m] - (zx - xoff)·Σ_k w[m, k] (the im2col rows hold x - xoff).
struct GemmOperands {
  std::vector<int8_t> w;
  std::vector<int32_t> corr;
};

GemmOperands gemm_operands(const Layer& l, int64_t K, int64_t kp, int32_t xoff) {
  GemmOperands o;
  o.w.assign(static_cast<size_t>(l.g.M * kp), 0);
  o.corr.resize(static_cast<size_t>(l.g.M));
  const int8_t* w = l.w.data<int8_t>();
  const int64_t taps = l.g.kH * l.g.kW;
  for (int64_t m = 0; m < l.g.M; ++m) {
    int64_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {  // k = (c·kH + kh)·kW + kw, the weight's own order
      const int64_t col = l.x_nhwc ? (k % taps) * l.g.C + k / taps : k;
      o.w[static_cast<size_t>(m * kp + col)] = w[m * K + k];
      sum += w[m * K + k];
    }
    const int64_t c = int64_t{l.bias[static_cast<size_t>(m)]} - int64_t{l.xq.zero_point[0] - xoff} * sum;
    o.corr[static_cast<size_t>(m)] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(c)));
  }
  return o;
}

// What both paths share: code types, output meta, requantization, bias and weight
// zero points on the device.
struct Prepared {
  ConvArgs a{};
  std::shared_ptr<DevRequant> rq;
  DeviceMem bias, wz;
};

bool prepare(const KernelRequest& r, Kernel* k, const Layer& l, const Shape& out_shape, Prepared* p) {
  const ir::Node& n = r.node;
  CodeType xt, wt, yt;
  if (!code_type(r.in[0].dtype, &xt)) return r.decline("needs 8-bit input (16x8 layers run on the CPU)");
  if (!code_type(l.w.dtype(), &wt) || !code_type(l.yq.dtype, &yt)) return r.decline("needs 8-bit weights and output");
  k->outputs = {{out_shape, l.yq.dtype, l.y_nhwc}};
  k->accepts_nhwc = l.x_nhwc;
  const ref::QRange range = ref::act_range(n);
  p->rq = std::make_shared<DevRequant>(dev_requant(accumulator_requantizer(n, l.mult),
                                                   l.yq.zero_point[0], range.lo, range.hi, n.label()));
  p->a = conv_args(l, xt, wt, yt);
  p->a.rq = p->rq->args;
  p->bias = upload(l.bias.data(), l.bias.size() * 4, n.label() + " bias");
  p->wz = upload(l.wz.data(), l.wz.size() * 4, n.label() + " weight zero points");
  p->a.bias = p->bias.as<int32_t>();
  p->a.wz = p->wz.as<int32_t>();
  return true;
}

// The direct kernel: any group, weight zero points, u8 or s8 weights.
bool build_direct(const KernelRequest& r, Kernel* k, const Layer& l, const Shape& out_shape) {
  Prepared p;
  if (!prepare(r, k, l, out_shape, &p)) return false;
  DeviceMem w = upload(l.w.raw(), l.w.nbytes(), r.node.label() + " weights");
  p.a.w = w.get();
  stage(r, k, {0}, [p, w](const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) {
    ConvArgs c = p.a;
    c.x = in[0];
    c.y = out[0];
    launch_qconv_direct(c, s);
  });
  return true;
}

// im2col + cuBLASLt int8 GEMM + requantizing epilogue: group 1, s8 weights with
// zero point 0, sizes cuBLASLt has an int8 algorithm for. A pointwise convolution
// (1x1, stride 1, no padding) of channels-last s8 codes with C a multiple of 4 needs
// no im2col: its input already is the GEMM's rows.
bool build_gemm(const KernelRequest& r, Kernel* k, const Layer& l, const Shape& out_shape) {
  if (l.g.group != 1) return r.decline("grouped convolution (the direct kernel runs it)");
  if (l.w.dtype() != DType::kInt8) return r.decline("u8 weights");
  for (int32_t z : l.wz)
    if (z != 0) return r.decline("a weight zero point other than 0");
  const int64_t K = l.g.C * l.g.kH * l.g.kW, kp = (K + 3) / 4 * 4, rows = l.g.N * l.g.oH * l.g.oW;
  auto gemm = std::make_shared<Int8Gemm>(rows, l.g.M, kp);
  if (!gemm->ok()) return r.decline(gemm->why());
  Prepared p;
  if (!prepare(r, k, l, out_shape, &p)) return false;
  const Geom& g = l.g;
  const bool pointwise = l.x_nhwc && p.a.xt == kS8 && g.C % 4 == 0 && g.kH == 1 && g.kW == 1 && g.sH == 1 && g.sW == 1 &&
                         g.pT == 0 && g.pL == 0 && g.oH == g.H && g.oW == g.W;
  const std::string what = r.node.label();
  const GemmOperands ops = gemm_operands(l, K, kp, p.a.xt == kU8 ? 128 : 0);
  DeviceMem w = upload(ops.w.data(), ops.w.size(), what + " weights");
  DeviceMem corr = upload(ops.corr.data(), ops.corr.size() * 4, what + " bias correction");
  DeviceMem cols = pointwise ? DeviceMem() : DeviceMem(static_cast<size_t>(rows * kp), what + " im2col rows");
  DeviceMem acc(static_cast<size_t>(rows * l.g.M) * 4, what + " int32 accumulators");
  {  // the fastest of cuBLASLt's algorithms for these sizes, timed on zero rows
    DeviceMem a = pointwise ? DeviceMem(static_cast<size_t>(rows * kp), what + " tuning rows") : cols;
    fill_zero(a.get(), static_cast<size_t>(rows * kp), stream());
    gemm->tune(a.as<int8_t>(), w.as<int8_t>(), acc.as<int32_t>());
  }
  // The closure owns every device buffer the args point into.
  stage(r, k, {0}, [p, kp, cols, gemm, w, acc, corr, pointwise](const std::vector<const void*>& in,
                                                                const std::vector<void*>& out, cudaStream_t s) {
    ConvArgs c = p.a;
    c.x = in[0];
    c.y = out[0];
    if (!pointwise) launch_im2col(c, kp, cols.as<int8_t>(), s);
    gemm->run(pointwise ? static_cast<const int8_t*>(in[0]) : cols.as<int8_t>(), w.as<int8_t>(), acc.as<int32_t>(), s);
    launch_gemm_epilogue(c, acc.as<int32_t>(), corr.as<int32_t>(), s);
  });
  return true;
}

using Builder = bool (*)(const KernelRequest&, Kernel*, const Layer&, const Shape&);

// qparams, multipliers and bias as the reference kernels read them.
bool read_layer(const KernelRequest& r, Layer* l, int64_t M) {
  const ir::Node& n = r.node;
  l->xq = n.in_q.at(0), l->wq = n.in_q.at(1), l->yq = n.out_q;
  ref::check_channels(n, l->xq, 1, "input qparams");
  ref::check_channels(n, l->wq, M, "weight qparams");
  ref::check_channels(n, l->yq, 1, "output qparams");
  std::vector<float> in_w;
  l->mult = accumulator_multipliers(n, M, &in_w);
  l->bias.assign(static_cast<size_t>(M), 0);
  if (r.in.size() > 2 && !n.inputs[2].empty()) {
    const Tensor& b = ref::need_const(n, r.consts, 2, "bias");
    if (b.numel() != M) return r.decline("the bias does not have one value per output channel");
    l->bias = int32_bias(n, b, M, in_w);
  }
  l->wz.resize(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) l->wz[static_cast<size_t>(m)] = ref::per(l->wq.zero_point, m);
  return true;
}

template <Builder B>
bool qconv(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  const ir::Node& n = r.node;
  if (r.in[0].shape.size() != 4) return r.decline("2-D convolutions only ([N, C, H, W] input)");
  if (r.consts.size() < 2 || !r.consts[1]) return r.decline("the weight is not a constant");
  Layer l;
  l.w = *r.consts[1];
  l.g = ref::conv_geom(n, r.in, l.w.shape());
  l.x_nhwc = r.in[0].nhwc;
  l.y_nhwc = r.nhwc_out;
  if (!read_layer(r, &l, l.g.M)) return false;
  return B(r, k, l, ref::spatial_out(r.in[0].shape, l.g.M, l.g));
}

// QGemm (transA 0, alpha 1, beta 1) and QLinearMatMul with a constant 2-D weight:
// rows of x times the weight, as a 1x1 convolution over [rows, K, 1, 1].
template <Builder B>
bool qgemm(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  if (single_rounding_fully_connected(r.node)) return r.decline("the target rounds fully connected layers once (the reference runs it)");
  GemmAsConv gc;
  if (!gemm_as_conv(r, r.node.op == "QGemm", &gc)) return false;
  Layer l;
  l.g = gc.g;
  l.w = gc.w;
  if (!read_layer(r, &l, gc.g.M)) return false;
  return B(r, k, l, gc.out);
}

}  // namespace

void register_conv_kernels() {
  // Tried in this order: the tensor-core GEMM where it applies, then the direct kernel.
  add_kernel("cuda", "QLinearConv", "cublaslt", qconv<build_gemm>);
  add_kernel("cuda", "QLinearConv", "cuda", qconv<build_direct>);
  for (const char* op : {"QGemm", "QLinearMatMul"}) {
    add_kernel("cuda", op, "cublaslt", qgemm<build_gemm>);
    add_kernel("cuda", op, "cuda", qgemm<build_direct>);
  }
}

}  // namespace qfx::runtime::cuda
