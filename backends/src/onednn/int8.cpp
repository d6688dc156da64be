// QLinearConv / QGemm / QLinearMatMul on oneDNN's int8 primitives (s8 weights with
// zero point 0), bit for bit the reference's codes. Under ONNX's arithmetic oneDNN
// finishes the codes itself; under a target's arithmetic (or accumulator width) it
// writes the s32 accumulator and qfx's requantizing epilogue finishes as the
// reference does.
#include <algorithm>
#include <cmath>
#include <string>

#include "../reference/common.h"
#include "common.h"
#include "qfx/runtime/arithmetic.h"

namespace qfx::runtime::onednn {
namespace {

dt qdt(DType d) { return d == DType::kUInt8 ? dt::u8 : dt::s8; }

std::string int8_decline(DType src) {
  if (src != DType::kUInt8) return "s8 activations without VNNI (oneDNN halves s8-source weights)";
  return "weights beyond +-64 without VNNI (u8 x s8 pair sums would saturate in int16; 7-bit weights run here)";
}

// Bound of output channel m's accumulator: sum|w| * max|x| (raw codes and codes minus
// the zero point). `out_first`: weights laid out [M, K...] (conv, transB), else [K, M].
int64_t accumulator_bound(DType src, int32_t zx, const Tensor& w, int64_t M, bool out_first, int64_t m) {
  const int32_t lo = src == DType::kUInt8 ? 0 : -128, hi = src == DType::kUInt8 ? 255 : 127;
  const int64_t xmax = std::max({std::abs(lo), std::abs(hi), std::abs(lo - zx), std::abs(hi - zx)});
  const int64_t K = M > 0 ? w.numel() / M : 0;
  const int8_t* wp = w.data<int8_t>();
  int64_t s = 0;
  for (int64_t k = 0; k < K; ++k) s += std::abs(static_cast<int64_t>(out_first ? wp[m * K + k] : wp[k * M + m]));
  return s * xmax;
}

// oneDNN passes an s32 destination through float, so an accumulator is exact only
// below 2^24: true if every output channel's accumulator_bound stays there.
bool s32_exact(DType src, int32_t zx, const Tensor& w, int64_t M, bool out_first, std::string* why) {
  for (int64_t m = 0; m < M; ++m)
    if (const int64_t b = accumulator_bound(src, zx, w, M, out_first, m); b > (int64_t{1} << 24)) {
      *why = "output channel " + std::to_string(m) + " can accumulate " + std::to_string(b) +
             " > 2^24, beyond what oneDNN's s32 output keeps exact (the reference runs it)";
      return false;
    }
  return true;
}

// oneDNN adds the bias to the accumulator in float, where the int32 accumulator of
// ONNX's integer ops (ONNX Runtime, the reference) wraps: true unless some channel's
// bias plus its accumulator_bound can leave int32 (a bias near +-2^31). qfx's own
// epilogue (a target's arithmetic) adds the bias as the reference does.
bool bias_fits_int32(DType src, int32_t zx, const Tensor& w, int64_t M, bool out_first, const std::vector<int32_t>& bias,
                     std::string* why) {
  for (int64_t m = 0; m < M; ++m) {
    const int64_t b = bias[static_cast<size_t>(m)], a = accumulator_bound(src, zx, w, M, out_first, m);
    if (b + a > INT32_MAX || b - a < INT32_MIN) {
      *why = "output channel " + std::to_string(m) + ": bias " + std::to_string(b) + " plus an accumulator of up to " +
             std::to_string(a) + " can leave int32, where it wraps (the reference runs it)";
      return false;
    }
  }
  return true;
}

// The primitive's attribute and the execution arguments it adds (scales, zero
// points, post-op operands), with the buffers they point into.
struct Int8Attr {
  dnnl::primitive_attr attr = scratchpad_attr();
  std::unordered_map<int, memory> args;
  std::vector<std::shared_ptr<void>> keep;
};

// Sets a per-tensor zero point of `arg` (the source's or the destination's). None
// for 0: oneDNN 3.x takes the value at execution, so a zero point set at all costs
// the source's compensation.
void zero_point(Int8Attr* a, int arg, int32_t z) {
  if (z == 0) return;
#if DNNL_VERSION_MAJOR >= 3
  a->attr.set_zero_points_mask(arg, 0);
  a->args[DNNL_ARG_ATTR_ZERO_POINTS | arg] = constant(memory::desc({1}, dt::s32, tag::a), std::vector<int32_t>{z}, &a->keep);
#else
  a->attr.set_zero_points(arg, 0, {z});
#endif
}

// oneDNN finishing the codes of node `n` with multipliers `mult` (M = mult.size()
// output channels, `conv`: [N, M, H, W] output, else [R, M]). 2.x: output scales
// m_c, fused Relu / Clip with bounds rounded to integers, then rounding in a
// post-op (half to even) before the destination zero point, as ONNX QuantizeLinear
// rounds before adding it. 3.x: no scales (its bias is added after them); the
// post-ops multiply acc + bias by m_c (a per-channel binary multiply), round half
// to even (when a zero point follows), clamp to the fused activation's code range
// less the zero point (when it is narrower than the dtype's), and the zero point
// comes last.
void finish_codes(const ir::Node& n, const std::vector<float>& mult, bool conv, Int8Attr* a) {
  zero_point(a, DNNL_ARG_SRC, n.in_q[0].zero_point[0]);
  zero_point(a, DNNL_ARG_DST, n.out_q.zero_point[0]);
  dnnl::post_ops po;
#if DNNL_VERSION_MAJOR >= 3
  const auto M = static_cast<int64_t>(mult.size());
  const memory::desc m_md = conv ? memory::desc({1, M, 1, 1}, dt::f32, tag::abcd) : memory::desc({1, M}, dt::f32, tag::ab);
  po.append_binary(dnnl::algorithm::binary_mul, m_md);
  a->args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = constant(m_md, mult, &a->keep);
  // Rounding commutes with a clamp to integers, but not with adding an odd zero
  // point; the final conversion rounds half to even too.
  const int32_t zy = n.out_q.zero_point[0];
  if (zy != 0) append_eltwise(&po, dnnl::algorithm::eltwise_round, 0.0f, 0.0f);
  const ref::QRange range = ref::act_range(n), full = ref::qrange(n.out_q.dtype);
  if (range.lo != full.lo || range.hi != full.hi)  // else the conversion's saturation clamps
    append_eltwise(&po, dnnl::algorithm::eltwise_clip, static_cast<float>(range.lo - zy), static_cast<float>(range.hi - zy));
#else
  a->attr.set_output_scales(mult.size() == 1 ? 0 : 2, mult);
  const float sy = n.out_q.scale[0];
  if (n.fused_act == "Relu") append_eltwise(&po, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (n.fused_act == "Clip")
    append_eltwise(&po, dnnl::algorithm::eltwise_clip, std::nearbyint(n.clip_lo / sy), std::nearbyint(n.clip_hi / sy));
  if (n.out_q.zero_point[0] != 0) append_eltwise(&po, dnnl::algorithm::eltwise_round, 0.0f, 0.0f);
#endif
  a->attr.set_post_ops(po);
}

// The int8 primitive of one layer and the descriptors around it.
struct Int8Layer {
  std::shared_ptr<dnnl::primitive> prim;
  memory::desc user_src, user_dst, w_user, b_md, src_pd, dst_pd, w_pd, scratch_pd;
  Shape out;
};

template <typename PD>
void take(const PD& pd, Int8Layer* l) {
  l->src_pd = pd.src_desc();
  l->dst_pd = pd.dst_desc();
  l->w_pd = pd.weights_desc();
  l->scratch_pd = pd.scratchpad_desc();
}

// QLinearConv's primitive with M output channels writing `ydt`.
bool conv_layer(const KernelRequest& r, int64_t M, dt ydt, bool bias, const dnnl::primitive_attr& attr, Int8Layer* l) {
  ConvShape c;
  if (!conv_shape(r, r.in[0].shape, r.consts[1]->shape(), &c)) return false;
  const dt xdt = qdt(r.in[0].dtype);
  l->user_src = memory::desc(c.src, xdt, r.in[0].nhwc ? tag::nhwc : tag::nchw);
  l->user_dst = memory::desc(c.dst, ydt, r.nhwc_out ? tag::nhwc : tag::nchw);
  l->w_user = memory::desc(c.w_dims, dt::s8, c.w_tag);
  l->b_md = memory::desc({M}, dt::s32, tag::a);
  auto pd = conv_pd(memory::desc(c.src, xdt, tag::any), memory::desc(c.w_dims, dt::s8, tag::any), bias ? l->b_md : memory::desc(),
                    memory::desc(c.dst, ydt, tag::any), c.strides, c.dilations, c.pad_l, c.pad_r, attr);
  l->prim = std::make_shared<dnnl::convolution_forward>(pd);
  take(pd, l);
  l->out = Shape(c.dst.begin(), c.dst.end());
  return true;
}

// QGemm / QLinearMatMul as oneDNN's matmul (its inner product takes no zero
// points): [R, K] x [K, M], the input's leading dims as rows.
bool matmul_layer(const KernelRequest& r, int64_t M, dt ydt, bool bias, const dnnl::primitive_attr& attr, Int8Layer* l) {
  const auto& x = r.in[0].shape;
  const auto& ws = r.consts[1]->shape();
  const bool tb = r.node.op == "QGemm" && r.node.attr_i("transB", 0) != 0;
  const int64_t K = x.back();
  int64_t R = 1;
  for (size_t d = 0; d + 1 < x.size(); ++d) R *= x[d];
  if ((tb ? ws[1] : ws[0]) != K) return r.decline("weight shape does not match the input");
  l->user_src = memory::desc({R, K}, qdt(r.in[0].dtype), tag::ab);
  l->user_dst = memory::desc({R, M}, ydt, tag::ab);
  l->w_user = memory::desc({K, M}, dt::s8, tb ? tag::ba : tag::ab);
  l->b_md = memory::desc({1, M}, dt::s32, tag::ab);
  auto pd = matmul_pd(l->user_src, memory::desc({K, M}, dt::s8, tag::any), bias ? l->b_md : memory::desc(), l->user_dst, attr);
  l->prim = std::make_shared<dnnl::matmul>(pd);
  take(pd, l);
  l->out = Shape(x.begin(), x.end() - 1);
  l->out.push_back(M);
  return true;
}

// The run function of a layer whose primitive writes s32 accumulators: qfx's
// requantization epilogue (the target's arithmetic) turns them into codes.
RunFn with_epilogue(const ir::Node& n, RunFn exec, const Int8Layer& l, bool conv, bool nhwc_out,
                    const std::vector<float>& mult, std::vector<int32_t> bias) {
  const int64_t M = conv ? l.out[1] : l.out.back();
  const Requantizer rq = accumulator_requantizer(n, mult);
  const ref::QRange range = ref::act_range(n);
  const int64_t plane = conv ? l.out[2] * l.out[3] : 1;
  const bool channel_last = !conv || nhwc_out;
  auto acc = std::make_shared<Tensor>(l.out, DType::kInt32);
  return [exec, acc, bias = std::move(bias), rq, range, plane, channel_last, M, zy = n.out_q.zero_point[0], y8 = n.out_q.dtype](
             const std::vector<const Tensor*>& i, const std::vector<Tensor*>& o) {
    exec(i, {acc.get()});
    const int32_t* a = acc->data<int32_t>();
    const int32_t* b = bias.data();
    // Channels last ([rows, M]) or planes ([N, M, plane]).
    auto finish = [&](auto* y) {
      if (channel_last) {
        for (int64_t e = 0; e < acc->numel(); e += M) rq.codes_per_channel(a + e, M, b, zy, range.lo, range.hi, y + e);
        return;
      }
      for (int64_t r = 0, e = 0; e < acc->numel(); ++r, e += plane) {
        const size_t c = static_cast<size_t>(r % M);
        rq.codes(a + e, plane, b[c], c, zy, range.lo, range.hi, y + e);
      }
    };
    if (y8 == DType::kUInt8) finish(static_cast<uint8_t*>(o[0]->raw()));
    else finish(static_cast<int8_t*>(o[0]->raw()));
  };
}

// The checks before any primitive: constant int8 weights with zero point 0, 8-bit
// activations, shapes; sets `M` (output channels).
bool int8_supported(const KernelRequest& r, int64_t* M) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  if (in.size() < 2 || !r.consts[1] || n.in_q.size() < 2) return r.decline("weights are not a constant with qparams");
  const Tensor& w = *r.consts[1];
  if (w.dtype() != DType::kInt8) return r.decline("weights are not int8");
  if (in[0].dtype == DType::kInt16 || n.out_q.dtype == DType::kInt16)
    return r.decline("int16 activations (16x8: the reference accumulates in 64 bits)");
  if (!onednn_int8_exact(in[0].dtype, w)) return r.decline(int8_decline(in[0].dtype));
  for (int32_t z : n.in_q[1].zero_point)
    if (z != 0) return r.decline("weight zero points other than 0");
  const auto& x = in[0].shape;
  const auto& ws = w.shape();
  if (n.op == "QLinearConv") {
    if (x.size() != 4 || ws.size() != 4 || n.attr_s("auto_pad", "NOTSET") != "NOTSET") return r.decline("needs a 4-D input, 4-D weights and auto_pad NOTSET");
    *M = ws[0];
  } else {
    // QLinearMatMul (a linear on a rank-3+ input): the leading dims are rows.
    if (ws.size() != 2 || x.size() < 2 || (x.size() != 2 && n.op != "QLinearMatMul"))
      return r.decline("needs a 2-D input (QLinearMatMul: 2-D or more) and 2-D weights");
    *M = n.op == "QGemm" && n.attr_i("transB", 0) != 0 ? ws[0] : ws[1];
  }
  if (n.in_q[1].scale.size() != 1 && static_cast<int64_t>(n.in_q[1].scale.size()) != *M)
    return r.decline("weight scales do not match the output channels (the reference reports it)");
  return true;
}

}  // namespace

bool qconv_qgemm(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  int64_t M = 0;
  if (!int8_supported(r, &M)) return false;
  if (single_rounding_fully_connected(n)) return r.decline("the target rounds fully connected layers once (the reference runs it)");
  const Tensor& w = *r.consts[1];
  const bool conv = n.op == "QLinearConv";
  std::vector<float> in_w;
  const std::vector<float> mult = accumulator_multipliers(n, M, &in_w);
  // int32 bias as the reference computes it.
  std::vector<int32_t> bias(static_cast<size_t>(M), 0);
  if (r.in.size() > 2 && !n.inputs[2].empty()) {
    if (!r.consts[2] || r.consts[2]->numel() != M) return r.decline("the bias is not a constant of M values");
    bias = int32_bias(n, *r.consts[2], M, in_w);
  }
  // A target's requantization or accumulator width: oneDNN writes the s32
  // accumulator (bias left out) and qfx's epilogue finishes as the reference does.
  const bool epilogue = n.arithmetic.requantize != RequantMode::kFloat || n.arithmetic.accumulator_bits < 32;
  const bool out_first = conv || (n.op == "QGemm" && n.attr_i("transB", 0) != 0);
  std::string why;
  if (!epilogue && !bias_fits_int32(r.in[0].dtype, n.in_q[0].zero_point[0], w, M, out_first, bias, &why)) return r.decline(why);
  if (epilogue && !s32_exact(r.in[0].dtype, n.in_q[0].zero_point[0], w, M, out_first, &why)) return r.decline(why);
  Int8Attr a;
  if (epilogue) zero_point(&a, DNNL_ARG_SRC, n.in_q[0].zero_point[0]);
  else finish_codes(n, mult, conv, &a);
  const dt ydt = epilogue ? dt::s32 : qdt(n.out_q.dtype);
  Int8Layer l;
  if (!(conv ? conv_layer(r, M, ydt, !epilogue, a.attr, &l) : matmul_layer(r, M, ydt, !epilogue, a.attr, &l))) return false;
  std::vector<std::shared_ptr<void>> keep = std::move(a.keep);
  std::unordered_map<int, memory> fixed = std::move(a.args);
  fixed[DNNL_ARG_WEIGHTS] = reorder_weights(l.w_user, w.raw(), l.w_pd, &keep);
  if (!epilogue) fixed[DNNL_ARG_BIAS] = constant(l.b_md, bias, &keep);
  k->outputs = {{l.out, n.out_q.dtype, conv && r.nhwc_out}};
  k->accepts_nhwc = conv;
  auto exec = make_exec(l.prim, l.user_src, l.src_pd, l.user_dst, l.dst_pd, l.scratch_pd, std::move(fixed), std::move(keep));
  k->run = epilogue ? with_epilogue(n, std::move(exec), l, conv, r.nhwc_out, mult, std::move(bias)) : std::move(exec);
  return true;
}

}  // namespace qfx::runtime::onednn

namespace qfx::runtime {

int native_int8_weight_bits() { return onednn::has_vnni() ? 8 : 7; }

bool onednn_int8_exact(DType src, const Tensor& weights) {
  if (onednn::has_vnni()) return true;
  if (src != DType::kUInt8 || weights.dtype() != DType::kInt8) return false;
  const int8_t* w = weights.data<int8_t>();
  for (int64_t i = 0; i < weights.numel(); ++i)
    if (w[i] < -64 || w[i] > 64) return false;
  return true;
}

}  // namespace qfx::runtime
