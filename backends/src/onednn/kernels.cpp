// oneDNN kernels: fp32 convolution (with fused ReLU / Clip post-ops) and inner
// product. Primitives, reordered weights, scratchpads and layout buffers are made
// once per plan (fixed shapes); a run only executes them.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "../kernels.h"
#include "../reference/common.h"
#include "qfx/runtime/registry.h"
#include "qfx/error.h"

namespace qfx::runtime {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// A buffer oneDNN memory can live in, owned by the kernel.
struct Buf {
  std::shared_ptr<uint8_t[]> bytes;
  explicit Buf(size_t n) : bytes(new uint8_t[n == 0 ? 1 : n]) {}
  void* get() const { return bytes.get(); }
};

dnnl::primitive_attr make_attr(const ir::Node& n) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops po;
  if (n.fused_act == "Relu") po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (n.fused_act == "Clip") po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, n.clip_lo, n.clip_hi);
  attr.set_post_ops(po);
  return attr;
}

// The run function of a primitive between plain user tensors (input 0 -> output
// 0): reorders into and out of the primitive's preferred layouts when they differ,
// with every memory object, buffer and argument built once; a run only swaps the
// user buffers' handles in. `fixed` holds the other arguments (weights, bias).
std::function<void(const std::vector<const Tensor*>&, const std::vector<Tensor*>&)> make_exec(
    std::shared_ptr<dnnl::primitive> prim, const memory::desc& user_src, const memory::desc& src_pd,
    const memory::desc& user_dst, const memory::desc& dst_pd, const memory::desc& scratch_pd,
    std::unordered_map<int, memory> fixed, std::vector<std::shared_ptr<void>> keep_alive) {
  auto& eng = engine();
  const bool src_plain = src_pd == user_src, dst_plain = dst_pd == user_dst;
  struct State {
    memory us, ud, src, dst;
    std::unordered_map<int, memory> args;
    std::shared_ptr<dnnl::reorder> src_reorder, dst_reorder;
    std::vector<std::shared_ptr<void>> keep;
  };
  auto st = std::make_shared<State>();
  auto buffer = [&](const memory::desc& d) {
    auto b = std::make_shared<Buf>(d.get_size());
    st->keep.push_back(b);
    return b->get();
  };
  st->keep = std::move(keep_alive);
  st->us = memory(user_src, eng, nullptr);
  st->ud = memory(user_dst, eng, nullptr);
  st->src = src_plain ? st->us : memory(src_pd, eng, buffer(src_pd));
  st->dst = dst_plain ? st->ud : memory(dst_pd, eng, buffer(dst_pd));
  if (!src_plain) st->src_reorder = std::make_shared<dnnl::reorder>(dnnl::reorder::primitive_desc(eng, user_src, eng, src_pd));
  if (!dst_plain) st->dst_reorder = std::make_shared<dnnl::reorder>(dnnl::reorder::primitive_desc(eng, dst_pd, eng, user_dst));
  st->args = std::move(fixed);
  st->args[DNNL_ARG_SRC] = st->src;
  st->args[DNNL_ARG_DST] = st->dst;
  st->args[DNNL_ARG_SCRATCHPAD] = memory(scratch_pd, eng, buffer(scratch_pd));
  return [st, prim](const std::vector<const Tensor*>& i, const std::vector<Tensor*>& o) {
    auto& strm = stream();
    st->us.set_data_handle(const_cast<void*>(i[0]->raw()));
    st->ud.set_data_handle(o[0]->raw());
    if (st->src_reorder) st->src_reorder->execute(strm, st->us, st->src);
    prim->execute(strm, st->args);
    if (st->dst_reorder) st->dst_reorder->execute(strm, st->dst, st->ud);
    strm.wait();
  };
}

// Weights reordered once into the layout the primitive wants; returns the memory
// (its buffer is appended to `keep`).
memory reorder_weights(const memory::desc& user, const void* data, const memory::desc& want,
                       std::vector<std::shared_ptr<void>>* keep) {
  auto& eng = engine();
  memory uw(user, eng, const_cast<void*>(data));
  auto buf = std::make_shared<Buf>(want.get_size());
  keep->push_back(buf);
  memory wm(want, eng, buf->get());
  dnnl::reorder(uw, wm).execute(stream(), uw, wm);
  stream().wait();
  return wm;
}

bool conv_fp32(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  const auto& consts = r.consts;
  const bool nhwc_out = r.nhwc_out;
  if (in.size() < 2 || in[0].dtype != DType::kFloat32 || in[0].shape.size() != 4 || !consts[1]) return r.decline("needs a 4-D float32 input and constant weights");
  if (n.attr_s("auto_pad", "NOTSET") != "NOTSET") return r.decline("auto_pad SAME/VALID (the reference computes the padding)");  // the reference handles SAME/VALID
  const Tensor& w = *consts[1];
  const Tensor* b = in.size() > 2 && !n.inputs[2].empty() ? consts[2] : nullptr;
  if (in.size() > 2 && !n.inputs[2].empty() && !b) return r.decline("the bias is not a constant");
  const auto& x = in[0].shape;
  const auto& ws = w.shape();
  if (ws.size() != 4) return r.decline("weights are not 4-D");
  const int64_t g = n.attr_i("group", 1), N = x[0], C = x[1], H = x[2], W = x[3], M = ws[0], kH = ws[2], kW = ws[3];
  if (g <= 0 || C % g || M % g || ws[1] * g != C) return r.decline("group does not divide the channels");
  auto s = n.attr_ints("strides", {1, 1}), d = n.attr_ints("dilations", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0});
  if (!window_attrs_ok(s, d, p, kH, kW)) return r.decline("needs 2 positive strides and dilations, 4 non-negative pads");
  const int64_t oH = (H + p[0] + p[2] - (d[0] * (kH - 1) + 1)) / s[0] + 1;
  const int64_t oW = (W + p[1] + p[3] - (d[1] * (kW - 1) + 1)) / s[1] + 1;
  if (oH <= 0 || oW <= 0) return r.decline("the window does not fit the input");
  const memory::dims src_dims = {N, C, H, W}, dst_dims = {N, M, oH, oW};
  const memory::dims w_dims = g == 1 ? memory::dims{M, C, kH, kW} : memory::dims{g, M / g, C / g, kH, kW};
  // Channels last when the input comes so or the consumers take it: no reorders
  // between layers; otherwise oneDNN picks its blocked layout and we reorder around it.
  const bool cl = in[0].nhwc || nhwc_out;
  auto src_any = memory::desc(src_dims, dt::f32, cl ? tag::nhwc : tag::any);
  auto dst_any = memory::desc(dst_dims, dt::f32, cl ? tag::nhwc : tag::any);
  auto w_any = memory::desc(w_dims, dt::f32, tag::any);
  auto b_md = memory::desc({M}, dt::f32, tag::a);
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                       src_any, w_any, b ? b_md : memory::desc(), dst_any, {s[0], s[1]},
                                       {d[0] - 1, d[1] - 1}, {p[0], p[1]}, {p[2], p[3]});
  dnnl::convolution_forward::primitive_desc pd(desc, make_attr(n), engine());
  std::vector<std::shared_ptr<void>> keep;
  std::unordered_map<int, memory> fixed = {
      {DNNL_ARG_WEIGHTS, reorder_weights({w_dims, dt::f32, g == 1 ? tag::oihw : tag::goihw}, w.raw(), pd.weights_desc(), &keep)}};
  if (b) {
    keep.push_back(std::make_shared<Tensor>(*b));
    fixed[DNNL_ARG_BIAS] = memory(b_md, engine(), const_cast<void*>(b->raw()));
  }
  k->outputs = {{{N, M, oH, oW}, DType::kFloat32, nhwc_out}};
  k->accepts_nhwc = true;
  k->run = make_exec(std::make_shared<dnnl::convolution_forward>(pd),
                     memory::desc(src_dims, dt::f32, in[0].nhwc ? tag::nhwc : tag::nchw), pd.src_desc(),
                     memory::desc(dst_dims, dt::f32, nhwc_out ? tag::nhwc : tag::nchw), pd.dst_desc(), pd.scratchpad_desc(),
                     std::move(fixed), std::move(keep));
  return true;
}

// Gemm, and MatMul by a constant 2-D weight (its leading dims flattened: a
// Linear on a [N, L, C] sequence), as one oneDNN inner product.
bool inner_product_fp32(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  const auto& consts = r.consts;
  const bool matmul = n.op == "MatMul";
  if (in.size() < 2 || in[0].dtype != DType::kFloat32 || !consts[1] || in[0].shape.size() < 2 || (!matmul && in[0].shape.size() != 2))
    return r.decline(matmul ? "needs a float32 input of rank >= 2 and a constant weight" : "needs a 2-D float32 input and constant weights");
  if (n.attr_i("transA", 0) != 0 || n.attr_f("alpha", 1.0f) != 1.0f || n.attr_f("beta", 1.0f) != 1.0f) return r.decline("transA, alpha or beta other than the defaults");
  const bool tb = !matmul && n.attr_i("transB", 0) != 0;
  const Tensor& w = *consts[1];
  if (w.shape().size() != 2) return r.decline("weights are not 2-D");
  const int64_t K = in[0].shape.back(), N = tb ? w.shape()[0] : w.shape()[1];
  int64_t M = 1;
  for (size_t d = 0; d + 1 < in[0].shape.size(); ++d) M *= in[0].shape[d];
  if ((tb ? w.shape()[1] : w.shape()[0]) != K) return r.decline("weight shape does not match the input");
  const Tensor* b = !matmul && in.size() > 2 && !n.inputs[2].empty() ? consts[2] : nullptr;
  if (!matmul && in.size() > 2 && !n.inputs[2].empty() && (!b || b->numel() != N)) return r.decline("the bias is not a constant of N values");
  auto& eng = engine();
  auto src_md = memory::desc({M, K}, dt::f32, tag::nc), dst_md = memory::desc({M, N}, dt::f32, tag::nc);
  auto w_any = memory::desc({N, K}, dt::f32, tag::any), b_md = memory::desc({N}, dt::f32, tag::a);
  dnnl::inner_product_forward::desc desc(dnnl::prop_kind::forward_inference, src_md, w_any, b ? b_md : memory::desc(), dst_md);
  dnnl::inner_product_forward::primitive_desc pd(desc, make_attr(n), eng);
  std::vector<std::shared_ptr<void>> keep;
  std::unordered_map<int, memory> fixed = {
      {DNNL_ARG_WEIGHTS, reorder_weights({{N, K}, dt::f32, tb ? tag::oi : tag::io}, w.raw(), pd.weights_desc(), &keep)}};
  if (b) {
    keep.push_back(std::make_shared<Tensor>(*b));
    fixed[DNNL_ARG_BIAS] = memory(b_md, eng, const_cast<void*>(b->raw()));
  }
  Shape out_shape = in[0].shape;
  out_shape.back() = N;
  k->outputs = {{out_shape, DType::kFloat32}};
  k->run = make_exec(std::make_shared<dnnl::inner_product_forward>(pd), src_md, pd.src_desc(), dst_md, pd.dst_desc(),
                     pd.scratchpad_desc(), std::move(fixed), std::move(keep));
  return true;
}

bool pool_fp32(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  const bool nhwc_out = r.nhwc_out;
  if (in.empty() || in[0].shape.size() != 4) return r.decline("needs a 4-D input");
  // Max pooling moves values, so u8/s8 codes pool exactly; averages stay float here.
  const DType dtype = in[0].dtype;
  if (dtype != DType::kFloat32 && !(n.op == "MaxPool" && (dtype == DType::kUInt8 || dtype == DType::kInt8))) return r.decline("oneDNN pools float32, and int8 only for MaxPool (averages are rounded by the reference)");
  const dt ddt = dtype == DType::kFloat32 ? dt::f32 : dtype == DType::kUInt8 ? dt::u8 : dt::s8;
  if (n.attr_s("auto_pad", "NOTSET") != "NOTSET" || n.attr_i("ceil_mode", 0) != 0 || n.attr_i("storage_order", 0) != 0)
    return r.decline("auto_pad, ceil_mode or storage_order other than the defaults");
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) return r.decline("the Indices output is used");
  auto kk = n.attr_ints("kernel_shape");
  if (kk.size() != 2) return r.decline("only 2-D windows");
  auto s = n.attr_ints("strides", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0}), d = n.attr_ints("dilations", {1, 1});
  if (d != std::vector<int64_t>{1, 1}) return r.decline("dilations other than 1");
  // Malformed attributes or ranks go to the reference, which reports them (a fuzzed
  // MaxPool with short strides read past them here).
  const auto& x = in[0].shape;
  if (x.size() != 4 || !window_attrs_ok(s, d, p, kk[0], kk[1]))
    return r.decline("needs a 4-D input, 2 positive strides and kernel dims, 4 non-negative pads");
  const int64_t oH = (x[2] + p[0] + p[2] - kk[0]) / s[0] + 1, oW = (x[3] + p[1] + p[3] - kk[1]) / s[1] + 1;
  if (oH <= 0 || oW <= 0) return r.decline("the window does not fit the input");
  const bool max = n.op == "MaxPool";
  const auto alg = max ? dnnl::algorithm::pooling_max
                       : n.attr_i("count_include_pad", 0) ? dnnl::algorithm::pooling_avg_include_padding
                                                          : dnnl::algorithm::pooling_avg_exclude_padding;
  auto& eng = engine();
  // int8: channels-last input as it comes, output channels last when the consumers take it.
  const bool out_nhwc = nhwc_out;
  auto src_md = memory::desc({x[0], x[1], x[2], x[3]}, ddt, in[0].nhwc ? tag::nhwc : tag::nchw);
  auto dst_md = memory::desc({x[0], x[1], oH, oW}, ddt, out_nhwc ? tag::nhwc : tag::nchw);
  // oneDNN's jit int8 pooling wants channels last (on nchw it runs a slow generic
  // loop): reorder around it.
  const auto ptag = ddt == dt::f32 && !in[0].nhwc && !nhwc_out ? tag::nchw : tag::nhwc;
  dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, alg,
                                   memory::desc({x[0], x[1], x[2], x[3]}, ddt, ptag),
                                   memory::desc({x[0], x[1], oH, oW}, ddt, ptag), {s[0], s[1]}, {kk[0], kk[1]},
                                   {p[0], p[1]}, {p[2], p[3]});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::pooling_forward::primitive_desc pd(desc, attr, eng);
  k->outputs = {{{x[0], x[1], oH, oW}, dtype, out_nhwc}};
  k->accepts_nhwc = true;
  k->run = make_exec(std::make_shared<dnnl::pooling_forward>(pd), src_md, pd.src_desc(), dst_md, pd.dst_desc(),
                     pd.scratchpad_desc(), {}, {});
  return true;
}

// int8 attributes: per-output-channel scales m_c = sx * sw_c / sy, fixed source and
// destination zero points, fused Relu / Clip (bounds rounded to integers first, so
// clamping before or after rounding agrees with the reference).
dnnl::primitive_attr int8_attr(const ir::Node& n, const std::vector<float>& mult, bool s32_out) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (s32_out) {  // the raw accumulator: the target's requantization runs in qfx's epilogue
    attr.set_zero_points(DNNL_ARG_SRC, 0, {n.in_q[0].zero_point[0]});
    return attr;
  }
  attr.set_output_scales(mult.size() == 1 ? 0 : 2, mult);
  attr.set_zero_points(DNNL_ARG_SRC, 0, {n.in_q[0].zero_point[0]});
  attr.set_zero_points(DNNL_ARG_DST, 0, {n.out_q.zero_point[0]});
  dnnl::post_ops po;
  const float sy = n.out_q.scale[0];
  if (n.fused_act == "Relu") po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (n.fused_act == "Clip")
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, std::nearbyint(n.clip_lo / sy), std::nearbyint(n.clip_hi / sy));
  // oneDNN adds the destination zero point to the scaled accumulator in float and
  // rounds after; ONNX QuantizeLinear (and the reference) rounds first and adds the
  // zero point after. Rounding in a post-op (half to even) makes the two agree.
  if (n.out_q.zero_point[0] != 0) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_round, 0.0f, 0.0f);
  attr.set_post_ops(po);
  return attr;
}

bool has_vnni() {
  static const bool vnni = [] {
    const auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx2_vnni ||
           isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return vnni;
}

std::string int8_decline(DType src, const Tensor& w) {
  if (src != DType::kUInt8) return "s8 activations without VNNI (oneDNN halves s8-source weights)";
  return "weights beyond +-64 without VNNI (u8 x s8 pair sums would saturate in int16; 7-bit weights run here)";
}

dt qdt(DType d) { return d == DType::kUInt8 ? dt::u8 : dt::s8; }

// oneDNN passes an s32 destination through float (scales are applied in f32), so
// an accumulator is exact only below 2^24: true if every output channel's bound
// sum|w| * max|x| (raw codes and codes minus the zero point) stays there.
// `out_first`: weights laid out [M, K...] (conv, transB), else [K, M].
bool s32_exact(DType src, int32_t zx, const Tensor& w, int64_t M, bool out_first, std::string* why) {
  const int32_t lo = src == DType::kUInt8 ? 0 : -128, hi = src == DType::kUInt8 ? 255 : 127;
  const int64_t xmax = std::max({std::abs(lo), std::abs(hi), std::abs(lo - zx), std::abs(hi - zx)});
  const int64_t K = M > 0 ? w.numel() / M : 0;
  const int8_t* wp = w.data<int8_t>();
  for (int64_t m = 0; m < M; ++m) {
    int64_t s = 0;
    for (int64_t k = 0; k < K; ++k) s += std::abs(static_cast<int64_t>(out_first ? wp[m * K + k] : wp[k * M + m]));
    if (s * xmax > (int64_t{1} << 24)) {
      *why = "output channel " + std::to_string(m) + " can accumulate " + std::to_string(s * xmax) +
             " > 2^24, beyond what oneDNN's s32 output keeps exact (the reference runs it)";
      return false;
    }
  }
  return true;
}


// QLinearConv / QGemm / QLinearMatMul on oneDNN int8 primitives (s8 weights with zero point 0).
bool qconv_qgemm(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  const auto& consts = r.consts;
  const bool nhwc_out = r.nhwc_out;
  if (in.size() < 2 || !consts[1] || n.in_q.size() < 2) return r.decline("weights are not a constant with qparams");
  const Tensor& w = *consts[1];
  const ir::QInfo &xq = n.in_q[0], &wq = n.in_q[1], &yq = n.out_q;
  if (w.dtype() != DType::kInt8) return r.decline("weights are not int8");
  if (in[0].dtype == DType::kInt16 || yq.dtype == DType::kInt16)
    return r.decline("int16 activations (16x8: the reference accumulates in 64 bits)");
  if (!onednn_int8_exact(in[0].dtype, w)) return r.decline(int8_decline(in[0].dtype, w));
  for (int32_t z : wq.zero_point)
    if (z != 0) return r.decline("weight zero points other than 0");
  const bool conv = n.op == "QLinearConv";
  const auto& x = in[0].shape;
  const auto& ws = w.shape();
  const bool tb = n.op == "QGemm" && n.attr_i("transB", 0) != 0;
  int64_t M;  // output channels
  if (conv) {
    if (x.size() != 4 || ws.size() != 4 || n.attr_s("auto_pad", "NOTSET") != "NOTSET") return r.decline("needs a 4-D input, 4-D weights and auto_pad NOTSET");
    M = ws[0];
  } else {
    // QLinearMatMul (a linear on a rank-3+ input): the leading dims are rows.
    if (ws.size() != 2 || x.size() < 2 || (x.size() != 2 && n.op != "QLinearMatMul"))
      return r.decline("needs a 2-D input (QLinearMatMul: 2-D or more) and 2-D weights");
    M = tb ? ws[0] : ws[1];
  }
  if (wq.scale.size() != 1 && static_cast<int64_t>(wq.scale.size()) != M)
    return r.decline("weight scales do not match the output channels (the reference reports it)");
  std::vector<float> in_w;
  const std::vector<float> mult = accumulator_multipliers(n, M, &in_w);
  // int32 bias as the reference computes it.
  Tensor bias({M}, DType::kInt32);
  const bool has_bias = in.size() > 2 && !n.inputs[2].empty();
  if (has_bias) {
    if (!consts[2] || consts[2]->numel() != M) return r.decline("the bias is not a constant of M values");
    const std::vector<int32_t> b32 = int32_bias(n, *consts[2], M, in_w);
    std::copy(b32.begin(), b32.end(), bias.data<int32_t>());
  }
  // A target's requantization or accumulator width: oneDNN writes the s32
  // accumulator (bias left out) and qfx's epilogue finishes as the reference does.
  const bool target = n.arithmetic.requantize != RequantMode::kFloat || n.arithmetic.accumulator_bits < 32;
  if (target) {
    std::string why;
    if (!s32_exact(in[0].dtype, xq.zero_point[0], w, M, conv || tb, &why)) return r.decline(why);
  }
  auto& eng = engine();
  auto attr = int8_attr(n, mult, target);
  memory::desc user_src, user_dst, w_user, w_any, b_md({M}, dt::s32, tag::a);
  std::shared_ptr<dnnl::primitive> prim;
  memory::desc src_pd, dst_pd, wdesc, spdesc;
  Shape out;
  if (conv) {
    const int64_t g = n.attr_i("group", 1), N = x[0], C = x[1], H = x[2], W = x[3], kH = ws[2], kW = ws[3];
    if (g <= 0 || C % g || M % g || ws[1] * g != C) return r.decline("group does not divide the channels");
    auto s = n.attr_ints("strides", {1, 1}), d = n.attr_ints("dilations", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0});
    if (!window_attrs_ok(s, d, p, kH, kW)) return r.decline("needs 2 positive strides and dilations, 4 non-negative pads");
    const int64_t oH = (H + p[0] + p[2] - (d[0] * (kH - 1) + 1)) / s[0] + 1;
    const int64_t oW = (W + p[1] + p[3] - (d[1] * (kW - 1) + 1)) / s[1] + 1;
    const memory::dims w_dims = g == 1 ? memory::dims{M, C, kH, kW} : memory::dims{g, M / g, C / g, kH, kW};
    user_src = memory::desc({N, C, H, W}, qdt(in[0].dtype), in[0].nhwc ? tag::nhwc : tag::nchw);
    user_dst = memory::desc({N, M, oH, oW}, target ? dt::s32 : qdt(yq.dtype), nhwc_out ? tag::nhwc : tag::nchw);
    w_user = memory::desc(w_dims, dt::s8, g == 1 ? tag::oihw : tag::goihw);
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        memory::desc({N, C, H, W}, qdt(in[0].dtype), tag::any), memory::desc(w_dims, dt::s8, tag::any),
        target ? memory::desc() : b_md,
        memory::desc({N, M, oH, oW}, target ? dt::s32 : qdt(yq.dtype), tag::any), {s[0], s[1]}, {d[0] - 1, d[1] - 1}, {p[0], p[1]},
        {p[2], p[3]});
    dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);
    prim = std::make_shared<dnnl::convolution_forward>(pd);
    src_pd = pd.src_desc();
    dst_pd = pd.dst_desc();
    wdesc = pd.weights_desc();
    spdesc = pd.scratchpad_desc();
    out = {N, M, oH, oW};
  } else {
    // matmul (oneDNN's inner product takes no zero points): [R, K] x [K, M].
    const int64_t K = x.back();
    int64_t R = 1;
    for (size_t d = 0; d + 1 < x.size(); ++d) R *= x[d];
    if ((tb ? ws[1] : ws[0]) != K) return r.decline("weight shape does not match the input");
    user_src = memory::desc({R, K}, qdt(in[0].dtype), tag::ab);
    user_dst = memory::desc({R, M}, target ? dt::s32 : qdt(yq.dtype), tag::ab);
    w_user = memory::desc({K, M}, dt::s8, tb ? tag::ba : tag::ab);
    b_md = memory::desc({1, M}, dt::s32, tag::ab);
    dnnl::matmul::desc desc(user_src, memory::desc({K, M}, dt::s8, tag::any), target ? memory::desc() : b_md, user_dst);
    dnnl::matmul::primitive_desc pd(desc, attr, eng);
    prim = std::make_shared<dnnl::matmul>(pd);
    src_pd = pd.src_desc();
    dst_pd = pd.dst_desc();
    wdesc = pd.weights_desc();
    spdesc = pd.scratchpad_desc();
    out = Shape(x.begin(), x.end() - 1);
    out.push_back(M);
  }
  std::vector<std::shared_ptr<void>> keep;
  keep.push_back(std::make_shared<Tensor>(bias));
  std::unordered_map<int, memory> fixed = {{DNNL_ARG_WEIGHTS, reorder_weights(w_user, w.raw(), wdesc, &keep)},
                                           {DNNL_ARG_BIAS, memory(b_md, eng, bias.raw())}};
  k->outputs = {{out, yq.dtype, conv && nhwc_out}};
  k->accepts_nhwc = conv;
  if (target) fixed.erase(DNNL_ARG_BIAS);
  auto exec = make_exec(prim, user_src, src_pd, user_dst, dst_pd, spdesc, std::move(fixed), std::move(keep));
  if (!target) {
    k->run = std::move(exec);
    return true;
  }
  const Requantizer rq = Requantizer::accumulator(n.arithmetic, mult, n.label());
  const ref::QRange range = ref::act_range(n);
  const int64_t plane = conv ? out[2] * out[3] : 1;
  const bool channel_last = !conv || nhwc_out;
  auto acc = std::make_shared<Tensor>(out, DType::kInt32);
  k->run = [exec, acc, bias, rq, range, plane, channel_last, M, zy = yq.zero_point[0], y8 = yq.dtype](
               const std::vector<const Tensor*>& i, const std::vector<Tensor*>& o) {
    exec(i, {acc.get()});
    const int32_t* a = acc->data<int32_t>();
    const int32_t* b = bias.data<int32_t>();
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
  return true;
}

// oneDNN raises dnnl::error for a configuration it has no implementation of:
// that is a decline, and the next implementation runs the node. An empty input
// (a dimension of size 0) is declined before oneDNN sees it: its primitive
// descriptors divide by the dims (SIGFPE in oneDNN 2.x).
KernelFactory guarded(bool (*f)(const KernelRequest&, Kernel*)) {
  return [f](const KernelRequest& r, Kernel* k) {
    for (const auto& m : r.in)
      for (int64_t d : m.shape)
        if (d == 0) return r.decline("an empty input (a dimension of size 0); the reference runs it");
    try {
      return f(r, k);
    } catch (const dnnl::error& e) {
      return r.decline(std::string("oneDNN has no implementation: ") + e.what());
    }
  };
}

}  // namespace

int native_int8_weight_bits() { return has_vnni() ? 8 : 7; }

bool onednn_int8_exact(DType src, const Tensor& weights) {
  if (has_vnni()) return true;
  if (src != DType::kUInt8 || weights.dtype() != DType::kInt8) return false;
  const int8_t* w = weights.data<int8_t>();
  for (int64_t i = 0; i < weights.numel(); ++i)
    if (w[i] < -64 || w[i] > 64) return false;
  return true;
}

void register_onednn_kernels() {
  add_kernel("onednn", "Conv", "onednn", guarded(conv_fp32));
  for (const char* op : {"Gemm", "MatMul"}) add_kernel("onednn", op, "onednn", guarded(inner_product_fp32));
  for (const char* op : {"MaxPool", "AveragePool"}) add_kernel("onednn", op, "onednn", guarded(pool_fp32));
  for (const char* op : {"QLinearConv", "QGemm", "QLinearMatMul"}) add_kernel("onednn", op, "onednn", guarded(qconv_qgemm));
}

}  // namespace qfx::runtime
