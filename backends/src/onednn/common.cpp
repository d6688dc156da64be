// What the oneDNN kernels share: engine and streams, the plan-time run function,
// weight reorders, and primitive descriptors in oneDNN's 2.x and 3.x API.
#include "common.h"

namespace qfx::runtime::onednn {
namespace {

// A buffer oneDNN memory can live in, owned by the kernel.
struct Buf {
  std::shared_ptr<uint8_t[]> bytes;
  explicit Buf(size_t n) : bytes(new uint8_t[n == 0 ? 1 : n]) {}
  void* get() const { return bytes.get(); }
};

}  // namespace

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

bool has_vnni() {
  // cpu_isa values are cumulative bit masks in both APIs: an ISA has VNNI when it
  // holds all the bits of AVX-512 VNNI or of AVX-VNNI (AMX and AVX10 do).
  static const bool vnni = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    auto holds = [isa](dnnl::cpu_isa f) { return (isa & static_cast<unsigned>(f)) == static_cast<unsigned>(f); };
    return holds(dnnl::cpu_isa::avx512_core_vnni) || holds(dnnl::cpu_isa::avx2_vnni);
  }();
  return vnni;
}

RunFn make_exec(std::shared_ptr<dnnl::primitive> prim, const memory::desc& user_src, const memory::desc& src_pd,
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

dnnl::primitive_attr scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void append_eltwise(dnnl::post_ops* po, dnnl::algorithm alg, float alpha, float beta) {
#if DNNL_VERSION_MAJOR >= 3
  po->append_eltwise(alg, alpha, beta);
#else
  po->append_eltwise(1.0f, alg, alpha, beta);
#endif
}

dnnl::primitive_attr fp32_attr(const ir::Node& n) {
  dnnl::primitive_attr attr = scratchpad_attr();
  dnnl::post_ops po;
  if (n.fused_act == "Relu") append_eltwise(&po, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (n.fused_act == "Clip") append_eltwise(&po, dnnl::algorithm::eltwise_clip, n.clip_lo, n.clip_hi);
  attr.set_post_ops(po);
  return attr;
}

bool conv_shape(const KernelRequest& r, const Shape& x, const Shape& ws, ConvShape* c) {
  const ir::Node& n = r.node;
  const int64_t g = n.attr_i("group", 1), N = x[0], C = x[1], H = x[2], W = x[3], M = ws[0], kH = ws[2], kW = ws[3];
  if (g <= 0 || C % g || M % g || ws[1] * g != C) return r.decline("group does not divide the channels");
  auto s = n.attr_ints("strides", {1, 1}), d = n.attr_ints("dilations", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0});
  if (!window_attrs_ok(s, d, p, kH, kW)) return r.decline("needs 2 positive strides and dilations, 4 non-negative pads");
  const int64_t oH = (H + p[0] + p[2] - (d[0] * (kH - 1) + 1)) / s[0] + 1;
  const int64_t oW = (W + p[1] + p[3] - (d[1] * (kW - 1) + 1)) / s[1] + 1;
  if (oH <= 0 || oW <= 0) return r.decline("the window does not fit the input");
  c->src = {N, C, H, W};
  c->dst = {N, M, oH, oW};
  c->w_dims = g == 1 ? memory::dims{M, C, kH, kW} : memory::dims{g, M / g, C / g, kH, kW};
  c->w_tag = g == 1 ? tag::oihw : tag::goihw;
  c->strides = {s[0], s[1]};
  c->dilations = {d[0] - 1, d[1] - 1};
  c->pad_l = {p[0], p[1]};
  c->pad_r = {p[2], p[3]};
  return true;
}

dnnl::convolution_forward::primitive_desc conv_pd(const memory::desc& src, const memory::desc& w,
                                                  const memory::desc& bias, const memory::desc& dst,
                                                  const memory::dims& strides, const memory::dims& dilations,
                                                  const memory::dims& pad_l, const memory::dims& pad_r,
                                                  const dnnl::primitive_attr& attr) {
  const auto prop = dnnl::prop_kind::forward_inference;
  const auto alg = dnnl::algorithm::convolution_direct;
#if DNNL_VERSION_MAJOR >= 3
  return {engine(), prop, alg, src, w, bias, dst, strides, dilations, pad_l, pad_r, attr};
#else
  return {dnnl::convolution_forward::desc(prop, alg, src, w, bias, dst, strides, dilations, pad_l, pad_r), attr, engine()};
#endif
}

dnnl::inner_product_forward::primitive_desc inner_product_pd(const memory::desc& src, const memory::desc& w,
                                                             const memory::desc& bias, const memory::desc& dst,
                                                             const dnnl::primitive_attr& attr) {
  const auto prop = dnnl::prop_kind::forward_inference;
#if DNNL_VERSION_MAJOR >= 3
  return {engine(), prop, src, w, bias, dst, attr};
#else
  return {dnnl::inner_product_forward::desc(prop, src, w, bias, dst), attr, engine()};
#endif
}

dnnl::matmul::primitive_desc matmul_pd(const memory::desc& src, const memory::desc& w, const memory::desc& bias,
                                       const memory::desc& dst, const dnnl::primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine(), src, w, bias, dst, attr};
#else
  return {dnnl::matmul::desc(src, w, bias, dst), attr, engine()};
#endif
}

dnnl::pooling_forward::primitive_desc pooling_pd(dnnl::algorithm alg, const memory::desc& src, const memory::desc& dst,
                                                 const memory::dims& strides, const memory::dims& kernel,
                                                 const memory::dims& pad_l, const memory::dims& pad_r,
                                                 const dnnl::primitive_attr& attr) {
  const auto prop = dnnl::prop_kind::forward_inference;
#if DNNL_VERSION_MAJOR >= 3
  const memory::dims dense(strides.size(), 0);
  return {engine(), prop, alg, src, dst, strides, kernel, dense, pad_l, pad_r, attr};
#else
  return {dnnl::pooling_forward::desc(prop, alg, src, dst, strides, kernel, pad_l, pad_r), attr, engine()};
#endif
}

}  // namespace qfx::runtime::onednn
