// oneDNN fp32 kernels: convolution and inner product with fused ReLU / Clip
// post-ops, and pooling (max pooling also on u8 / s8 codes). Primitives, reordered
// weights, scratchpads and layout buffers are made once per plan (fixed shapes); a
// run only executes them.
#include <algorithm>

#include "../reference/common.h"
#include "common.h"

namespace qfx::runtime::onednn {

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
  if (w.shape().size() != 4) return r.decline("weights are not 4-D");
  ConvShape c;
  if (!conv_shape(r, in[0].shape, w.shape(), &c)) return false;
  const int64_t M = c.dst[1];
  // Channels last when the input comes so or the consumers take it: no reorders
  // between layers; otherwise oneDNN picks its blocked layout and we reorder around it.
  const bool cl = in[0].nhwc || nhwc_out;
  auto src_any = memory::desc(c.src, dt::f32, cl ? tag::nhwc : tag::any);
  auto dst_any = memory::desc(c.dst, dt::f32, cl ? tag::nhwc : tag::any);
  auto w_any = memory::desc(c.w_dims, dt::f32, tag::any);
  auto b_md = memory::desc({M}, dt::f32, tag::a);
  auto pd = conv_pd(src_any, w_any, b ? b_md : memory::desc(), dst_any, c.strides, c.dilations, c.pad_l, c.pad_r, fp32_attr(n));
  std::vector<std::shared_ptr<void>> keep;
  std::unordered_map<int, memory> fixed = {
      {DNNL_ARG_WEIGHTS, reorder_weights({c.w_dims, dt::f32, c.w_tag}, w.raw(), pd.weights_desc(), &keep)}};
  if (b) {
    keep.push_back(std::make_shared<Tensor>(*b));
    fixed[DNNL_ARG_BIAS] = memory(b_md, engine(), const_cast<void*>(b->raw()));
  }
  k->outputs = {{Shape(c.dst.begin(), c.dst.end()), DType::kFloat32, nhwc_out}};
  k->accepts_nhwc = true;
  k->run = make_exec(std::make_shared<dnnl::convolution_forward>(pd),
                     memory::desc(c.src, dt::f32, in[0].nhwc ? tag::nhwc : tag::nchw), pd.src_desc(),
                     memory::desc(c.dst, dt::f32, nhwc_out ? tag::nhwc : tag::nchw), pd.dst_desc(), pd.scratchpad_desc(),
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
  auto pd = inner_product_pd(src_md, w_any, b ? b_md : memory::desc(), dst_md, fp32_attr(n));
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
  // int8: channels-last input as it comes, output channels last when the consumers take it.
  const bool out_nhwc = nhwc_out;
  auto src_md = memory::desc({x[0], x[1], x[2], x[3]}, ddt, in[0].nhwc ? tag::nhwc : tag::nchw);
  auto dst_md = memory::desc({x[0], x[1], oH, oW}, ddt, out_nhwc ? tag::nhwc : tag::nchw);
  // oneDNN's jit int8 pooling wants channels last (on nchw it runs a slow generic
  // loop): reorder around it.
  const auto ptag = ddt == dt::f32 && !in[0].nhwc && !nhwc_out ? tag::nchw : tag::nhwc;
  auto pd = pooling_pd(alg, memory::desc({x[0], x[1], x[2], x[3]}, ddt, ptag), memory::desc({x[0], x[1], oH, oW}, ddt, ptag),
                       {s[0], s[1]}, {kk[0], kk[1]}, {p[0], p[1]}, {p[2], p[3]}, scratchpad_attr());
  k->outputs = {{{x[0], x[1], oH, oW}, dtype, out_nhwc}};
  k->accepts_nhwc = true;
  k->run = make_exec(std::make_shared<dnnl::pooling_forward>(pd), src_md, pd.src_desc(), dst_md, pd.dst_desc(),
                     pd.scratchpad_desc(), {}, {});
  return true;
}

}  // namespace qfx::runtime::onednn
