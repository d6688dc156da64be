// ONNX weighted layers: Conv, ConvTranspose, Gemm, MatMul (+ a bias Add),
// BatchNormalization, LayerNormalization, InstanceNormalization.
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "builder.h"
#include "proto.h"

namespace qfx::fx::onnx_detail {
namespace {

void share(torch::Tensor& param, const at::Tensor& t) { param.set_data(t.detach().clone().contiguous()); }

// A module read from the file, in eval mode: the builder's shadow runs call it, and a
// batch norm in training mode would blend their batch statistics into its running ones.
template <typename M>
LoadedModule loaded(M holder) {
  holder->eval();
  return {holder.ptr(), tensor_call_fn(holder.ptr())};
}

template <size_t D, typename Holder, typename Options>
Value conv_module(Builder& b, Node* x, const at::Tensor& w, const at::Tensor& bias, const std::vector<int64_t>& s,
                  const std::vector<int64_t>& p, const std::vector<int64_t>& dil, int64_t g, const std::string& cls) {
  Options o(w.size(1) * g, w.size(0), torch::ExpandingArray<D>(w.sizes().slice(2).vec()));
  o.stride(torch::ExpandingArray<D>(s)).padding(torch::ExpandingArray<D>(p)).dilation(torch::ExpandingArray<D>(dil)).groups(g).bias(bias.defined());
  Holder m(o);
  share(m->weight, w);
  if (bias.defined()) share(m->bias, bias);
  return b.module(cls, loaded(m), x, b.node().input(1));
}

void conv(Builder& b) {
  const int64_t d = b.rank(0) - 2;
  if (d < 1 || d > 3) b.fail("input rank " + std::to_string(d + 2) + " (qfx reads 1-D, 2-D and 3-D convolutions)");
  Node* x = b.tensor(0);
  const bool const_w = b.in(1).constant.defined() && (!b.has_input(2) || b.in(2).constant.defined());
  const std::vector<int64_t> wshape = b.shape(1);
  if (static_cast<int64_t>(wshape.size()) != d + 2) b.invalid("the weight's rank is not the input's");
  const std::vector<int64_t> kernel(wshape.begin() + 2, wshape.end());
  const std::vector<int64_t> s = b.attr_ints_n("strides", static_cast<size_t>(d), std::vector<int64_t>(d, 1));
  const std::vector<int64_t> dil = b.attr_ints_n("dilations", static_cast<size_t>(d), std::vector<int64_t>(d, 1));
  const int64_t g = attr_i(b.node(), "group", 1);
  const std::vector<int64_t> p = symmetric_pads(b, &x, kernel, s, dil, 0.0);
  if (!const_w || !b.rebuild_modules()) {
    const std::string op = "aten::conv" + std::to_string(d) + "d";
    b.bind(0, b.call(op, {Argument(x), Argument(b.tensor(1)), b.has_input(2) ? Argument(b.tensor(2)) : Argument(), Argument(c10::IValue(s)),
                          Argument(c10::IValue(p)), Argument(c10::IValue(dil)), Argument(c10::IValue(g))}));
    return;
  }
  const at::Tensor w = b.constant(1, "the weight");
  const at::Tensor bias = b.has_input(2) ? b.constant(2, "the bias") : at::Tensor();
  if (d == 1) b.bind(0, conv_module<1, torch::nn::Conv1d, torch::nn::Conv1dOptions>(b, x, w, bias, s, p, dil, g, "Conv1d"));
  if (d == 2) b.bind(0, conv_module<2, torch::nn::Conv2d, torch::nn::Conv2dOptions>(b, x, w, bias, s, p, dil, g, "Conv2d"));
  if (d == 3) b.bind(0, conv_module<3, torch::nn::Conv3d, torch::nn::Conv3dOptions>(b, x, w, bias, s, p, dil, g, "Conv3d"));
}

void conv_transpose(Builder& b) {
  if (b.rank(0) != 4) b.fail("qfx reads 2-D transposed convolutions");
  if (b.rank(1) != 4) b.invalid("the weight's rank is not the input's");
  if (attribute(b.node(), "output_shape")) b.fail("output_shape is not supported; export with pads and output_padding");
  const std::string ap = attr_s(b.node(), "auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID") b.fail("auto_pad " + ap + " is not supported for ConvTranspose");
  const at::Tensor w = b.constant(1, "the weight");
  const at::Tensor bias = b.has_input(2) ? b.constant(2, "the bias") : at::Tensor();
  const int64_t g = attr_i(b.node(), "group", 1);
  std::vector<int64_t> pads = attr_ints(b.node(), "pads", {0, 0, 0, 0});
  if (ap == "VALID") pads = {0, 0, 0, 0};
  if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3]) b.fail("asymmetric pads are not supported");
  torch::nn::ConvTranspose2dOptions o(w.size(0), w.size(1) * g, torch::ExpandingArray<2>(w.sizes().slice(2).vec()));
  o.stride(torch::ExpandingArray<2>(attr_ints(b.node(), "strides", {1, 1})))
      .padding(torch::ExpandingArray<2>(std::vector<int64_t>{pads[0], pads[1]}))
      .output_padding(torch::ExpandingArray<2>(attr_ints(b.node(), "output_padding", {0, 0})))
      .dilation(torch::ExpandingArray<2>(attr_ints(b.node(), "dilations", {1, 1})))
      .groups(g)
      .bias(bias.defined());
  torch::nn::ConvTranspose2d m(o);
  share(m->weight, w);
  if (bias.defined()) share(m->bias, bias);
  b.bind(0, b.module("ConvTranspose2d", loaded(m), b.tensor(0), b.node().input(1)));
}

Value linear(Builder& b, Node* x, const at::Tensor& w, const at::Tensor& bias, const std::string& weight_name) {
  torch::nn::Linear m(torch::nn::LinearOptions(w.size(1), w.size(0)).bias(bias.defined()));
  share(m->weight, w);
  if (bias.defined()) share(m->bias, bias);
  return b.module("Linear", loaded(m), x, weight_name);
}

void gemm(Builder& b) {
  if (attr_i(b.node(), "transA", 0)) b.fail("transA = 1 is not supported (the activation must be [N, K])");
  const float alpha = attr_f(b.node(), "alpha", 1.f), beta = attr_f(b.node(), "beta", 1.f);
  const bool const_w = b.in(1).constant.defined() && (!b.has_input(2) || b.in(2).constant.defined());
  if (!const_w || !b.rebuild_modules()) {
    Node* bm = b.tensor(1);
    if (!attr_i(b.node(), "transB", 0)) bm = b.node_of(b.call("aten::t", {Argument(bm)}));  // linear takes [N, K]
    Value y = b.call("aten::linear", {Argument(b.tensor(0)), Argument(bm), Argument()});
    if (alpha != 1.f) y = b.call("aten::mul.Scalar", {Argument(b.node_of(y)), Argument(c10::IValue(static_cast<double>(alpha)))});
    if (b.has_input(2)) {
      Node* c = b.tensor(2);
      if (beta != 1.f) c = b.node_of(b.call("aten::mul.Scalar", {Argument(c), Argument(c10::IValue(static_cast<double>(beta)))}));
      y = b.call("aten::add.Tensor", {Argument(b.node_of(y)), Argument(c)});
    }
    b.bind(0, y);
    return;
  }
  at::Tensor w = b.constant(1, "B");
  if (w.dim() != 2) b.fail("B must be 2-D");
  if (!attr_i(b.node(), "transB", 0)) w = w.t();
  w = w * alpha;
  at::Tensor bias;
  if (b.has_input(2)) {
    const at::Tensor c = b.constant(2, "C");
    if (c.numel() != w.size(0) && c.numel() != 1) b.fail("C must hold one value per output feature or one value");
    bias = (c.numel() == 1 ? c.reshape({1}).expand({w.size(0)}) : c.reshape({w.size(0)})) * beta;
  }
  b.bind(0, linear(b, b.tensor(0), w.contiguous(), bias, b.node().input(1)));
}

// MatMul by a constant [K, N] weight is a Linear; a following Add of a constant
// [N] bias is its bias.
void matmul(Builder& b) {
  if (!b.in(1).constant.defined() || b.rank(1) != 2 || b.rank(0) < 1 || !b.rebuild_modules()) {
    b.bind(0, b.call("aten::matmul", {Argument(b.tensor(0)), Argument(b.tensor(1))}));
    return;
  }
  const at::Tensor w = b.constant(1, "the weight").t().contiguous();
  at::Tensor bias;
  const onnx::NodeProto* add = b.sole_consumer(0);
  if (add && add->op_type() == "Add" && add->input_size() == 2) {
    const std::string other = add->input(0) == b.node().output(0) ? add->input(1) : add->input(0);
    if (other != b.node().output(0)) bias = b.constant_named(other);
    if (bias.defined() && (bias.numel() != w.size(0) || bias.dim() > 1 && bias.size(-1) != w.size(0) || !bias.is_floating_point()))
      bias = at::Tensor();
  }
  Value y = linear(b, b.tensor(0), w, bias.defined() ? bias.reshape({w.size(0)}) : bias, b.node().input(1));
  if (bias.defined()) b.absorb(*add, y);
  b.bind(0, y);
}

void batch_norm(Builder& b) {
  if (attr_i(b.node(), "training_mode", 0)) b.fail("training_mode = 1; export the model in eval mode");
  const int64_t r = b.rank(0);
  const at::Tensor w = b.constant(1, "scale"), bias = b.constant(2, "B"), mean = b.constant(3, "input_mean"),
                   var = b.constant(4, "input_var");
  torch::nn::BatchNormOptions o(mean.size(0));
  o.eps(attr_f(b.node(), "epsilon", 1e-5f)).momentum(1.0 - attr_f(b.node(), "momentum", 0.9f)).affine(true).track_running_stats(true);
  auto fill = [&](auto m) {
    share(m->weight, w);
    share(m->bias, bias);
    m->running_mean.set_data(mean.to(at::kFloat).clone());
    m->running_var.set_data(var.to(at::kFloat).clone());
    return loaded(m);
  };
  const std::string& wn = b.node().input(1);
  if (r == 2 || r == 3) b.bind(0, b.module("BatchNorm1d", fill(torch::nn::BatchNorm1d(o)), b.tensor(0), wn));
  else if (r == 4) b.bind(0, b.module("BatchNorm2d", fill(torch::nn::BatchNorm2d(o)), b.tensor(0), wn));
  else if (r == 5) b.bind(0, b.module("BatchNorm3d", fill(torch::nn::BatchNorm3d(o)), b.tensor(0), wn));
  else b.fail("input rank " + std::to_string(r));
}

void layer_norm(Builder& b) {
  if (b.node().output_size() > 1 && !b.node().output(1).empty()) b.fail("the Mean / InvStdDev outputs are not supported");
  const std::vector<int64_t> s = b.shape(0);
  const int64_t axis = b.axis(attr_i(b.node(), "axis", -1), static_cast<int64_t>(s.size()), "axis");
  const std::vector<int64_t> normalized(s.begin() + axis, s.end());
  for (int64_t d : normalized)
    if (d < 0) b.fail("the normalized dims must be static");
  const float eps = attr_f(b.node(), "epsilon", 1e-5f);
  const at::Tensor w = b.constant(1, "Scale");
  const at::Tensor bias = b.has_input(2) ? b.constant(2, "B") : at::zeros_like(w);
  torch::nn::LayerNorm m(torch::nn::LayerNormOptions(normalized).eps(eps).elementwise_affine(true));
  share(m->weight, w.reshape(normalized));
  share(m->bias, bias.reshape(normalized));
  b.bind(0, b.module("LayerNorm", loaded(m), b.tensor(0), b.node().input(1)));
}

void instance_norm(Builder& b) {
  const double eps = attr_f(b.node(), "epsilon", 1e-5f);
  b.bind(0, b.call("aten::instance_norm", {Argument(b.tensor(0)), Argument(b.tensor(1)), Argument(b.tensor(2)), Argument(), Argument(),
                                           Argument(c10::IValue(true)), Argument(c10::IValue(0.1)), Argument(c10::IValue(eps)),
                                           Argument(c10::IValue(false))}));
}

}  // namespace

void add_layer_ops(ConverterTable& t) {
  t["Conv"] = conv;
  t["ConvTranspose"] = conv_transpose;
  t["Gemm"] = gemm;
  t["MatMul"] = matmul;
  t["BatchNormalization"] = batch_norm;
  t["LayerNormalization"] = layer_norm;
  t["InstanceNormalization"] = instance_norm;
}
}  // namespace qfx::fx::onnx_detail
