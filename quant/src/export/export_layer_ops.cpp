// The op catalog's layers: convolutions, linear (the module and F.linear), batch
// norm and matmul between activations. A prepared layer exports through its
// QuantizedConvLinear (Exporter::weighted, here); these records export the ones
// prepare_fx left float, and F.linear on a parameter.
#include <torch/nn/modules/batchnorm.h>

#include "export_shape.h"
#include "exporter.h"
#include "op_families.h"

namespace qfx::quant::detail {
namespace {

// The int8 weight (and int32 bias) of `f` as DequantizeLinear values: *wname, and
// *bname when the layer has a quantized bias. `matmul`: W^T stored (per channel: axis 1).
void quantized_weight(Exporter& e, const fx::Node& n, const QuantizedConvLinear& f, bool matmul, std::string* wname,
                      std::string* bname) {
  const at::Tensor codes = matmul ? f.weight_codes().t().contiguous() : f.weight_codes();
  *wname = e.dequantize_weight(n.name(), codes, f.weight_qparams(), matmul ? 1 : f.weight_out_axis());
  if (!f.bias_codes().defined()) return;
  // int32 bias, scale = input scale x weight scale
  const std::string bi = e.init(n.name() + "_bias_q", f.bias_codes());
  const std::string bsn = e.init(n.name() + "_bias_scale", f.bias_scale());
  const std::string bz = e.init(n.name() + "_bias_zero_point", at::zeros({f.bias_codes().numel()}, at::kInt));
  *bname = e.fresh(n.name() + "_bias");
  auto* bn = e.node("DequantizeLinear", {bi, bsn, bz}, *bname, *bname);
  e.attr_i(bn, "axis", 0);
}

// Conv / ConvTranspose of `f` over value x with weight and bias values, writing y.
void conv(Exporter& e, const fx::Node& n, const QuantizedConvLinear& f, const std::string& x, const std::string& wname,
          const std::string& bname, const std::string& y) {
  const at::Tensor w = f.weight_codes();
  const bool tr = f.op() == FusedConvLinear::Op::kConvTranspose;
  auto* p = e.node(tr ? "ConvTranspose" : "Conv", {x, wname, bname}, y, n.name());
  std::vector<int64_t> k(w.sizes().begin() + 2, w.sizes().end()), pads = f.padding();
  pads.insert(pads.end(), f.padding().begin(), f.padding().end());
  e.attr_ints(p, "kernel_shape", k);
  e.attr_ints(p, "strides", f.stride());
  e.attr_ints(p, "pads", pads);
  e.attr_ints(p, "dilations", f.dilation());
  e.attr_i(p, "group", f.groups());
  if (tr) e.attr_ints(p, "output_padding", f.output_padding());
}

// A weighted layer module that prepare_fx left float (not fused, not observed).
void float_layer(Exporter& e, fx::Node& n, torch::nn::Module&) {
  const std::string op = canonical_op_name(n, e.gm_);
  std::string why;
  auto f = FusedConvLinear::create(e.gm_.get_submodule(n.target()), nullptr, FusedConvLinear::BnMode::kFold, FusedActivation::kNone, &why);
  if (!f) unsupported(n, why);
  e.res_.float_ops.push_back(n.name() + " (" + op + "): float weights (not prepared for int8)");
  e.weighted(&n, QuantizedConvLinear(*f, /*quantize_weight=*/false, -1.0f));
}

// F.linear(x, W, b) on a parameter W.
void functional_linear(Exporter& ex, fx::Node& node) {
  fx::Node* n = &node;
  // y = x W^T + b: MatMul with Transpose(W) (folded at load when W is a parameter);
  // a quantized parameter (prepare_fx's weight FakeQuantize, converted) as the
  // DequantizeLinear of its codes, stored transposed (per channel: axis 1).
  std::string wt;
  const fx::Argument& wa = n->args().at(1);
  if (!ex.opt_.float_model && wa.is_node() && ex.weight_of_functional_linear(wa.node)) {
    const auto* qd = dynamic_cast<const QuantDequant*>(ex.gm_.get_submodule(wa.node->target()).get());
    if (!qd) unsupported(*n, "internal: the weight of a quantized functional linear is not a QuantDequant");
    const QParams& q = qd->qparams();
    const at::Tensor w = ex.gm_.get_attr(wa.node->args()[0].node->target()).detach().to(at::kFloat);
    const at::Tensor codes = quantize_weight_codes(w, q, /*axis=*/0).t().contiguous();
    wt = ex.dequantize_weight(n->name(), codes, q, /*channel_axis=*/1);
  } else {
    wt = ex.fresh(n->name() + "_weight_t");
    ex.node("Transpose", {ex.value(*n, wa)}, wt, wt);
  }
  std::string y = ex.fresh(n->name());
  ex.node("MatMul", {ex.value(*n, n->args().at(0)), wt}, y, n->name());
  if (n->args().size() > 2 && !(n->args().at(2).is_const() && n->args().at(2).value.isNone())) {
    const std::string yb = ex.fresh(n->name() + "_bias");
    ex.node("Add", {y, ex.operand(*n, n->args().at(2))}, yb, yb);
    y = yb;
  }
  ex.names_[n] = y;
  ex.rank_[n] = ex.rank_of(n->args().at(0));
}

// An unfused BatchNorm2d: ONNX BatchNormalization in float.
// A BatchNorm1d / 2d / 3d module not folded into a layer: ONNX BatchNormalization
// (inputs [N, C] or [N, C, spatial...]) in float.
template <typename Impl>
void batch_norm_node(Exporter& e, fx::Node& n, Impl* bn, const char* cls) {
  const std::string y = e.fresh(n.name());
  auto* p = e.node("BatchNormalization",
                   {e.value(n, n.args().at(0)),
                    e.init("bn_scale", bn->weight.defined() ? bn->weight : at::ones_like(bn->running_mean)),
                    e.init("bn_bias", bn->bias.defined() ? bn->bias : at::zeros_like(bn->running_mean)),
                    e.init("bn_mean", bn->running_mean), e.init("bn_var", bn->running_var)},
                   y, n.name());
  e.attr_f(p, "epsilon", static_cast<float>(bn->options.eps()));
  e.names_[&n] = y;
  e.rank_[&n] = e.rank_of(n.args().at(0));
  e.res_.float_ops.push_back(n.name() + " (" + cls + "): unfused batch norm runs in float");
}

void batch_norm_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  if (auto* bn = dynamic_cast<torch::nn::BatchNorm1dImpl*>(&m)) return batch_norm_node(e, n, bn, "batchnorm1d");
  if (auto* bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(&m)) return batch_norm_node(e, n, bn, "batchnorm2d");
  if (auto* bn = dynamic_cast<torch::nn::BatchNorm3dImpl*>(&m)) return batch_norm_node(e, n, bn, "batchnorm3d");
  unsupported(n, "a batch norm module of another class has no ONNX export in qfx");
}

// A tensor argument or None: its ONNX value, or "" for None / absent.
std::string optional_value(Exporter& e, const fx::Node& n, size_t i) {
  if (i >= n.args().size() || (n.args()[i].is_const() && n.args()[i].value.isNone())) return "";
  return e.operand(n, n.args()[i]);
}

// convolution(x, w, b?, stride, padding, dilation, transposed, output_padding, groups)
// and conv{1,2,3}d(x, w, b?, stride, padding, dilation, groups) called as functions:
// ONNX Conv / ConvTranspose on the weight as given (an initializer for a parameter).
void conv_function(Exporter& e, fx::Node& n) {
  const bool general = n.target().rfind("aten::convolution", 0) == 0;
  const bool transposed = general && e.num_arg(n, 6, 0) != 0;
  const std::vector<int64_t> w = dims_static(e, n, n.args().at(1));
  const size_t spatial = w.size() - 2;
  auto per_dim = [&](size_t i, int64_t def) {
    std::vector<int64_t> v = i < n.args().size() && !(n.args()[i].is_const() && n.args()[i].value.isString()) ? e.ints_arg(n, i)
                                                                                                              : std::vector<int64_t>{};
    if (v.empty()) v.assign(spatial, def);
    if (v.size() == 1) v.assign(spatial, v[0]);
    return v;
  };
  if (n.args().size() > 4 && n.args()[4].is_const() && n.args()[4].value.isString() && n.args()[4].value.toStringRef() != "valid")
    unsupported(n, "padding='" + n.args()[4].value.toStringRef() + "' (give the padding as numbers)");
  std::vector<std::string> in = {e.value(n, n.args().at(0)), e.operand(n, n.args().at(1))};
  if (std::string b = optional_value(e, n, 2); !b.empty()) in.push_back(b);
  const std::string y = e.fresh(n.name());
  e.last_ = e.node(transposed ? "ConvTranspose" : "Conv", in, y, n.name());
  e.attr_ints(e.last_, "kernel_shape", std::vector<int64_t>(w.begin() + 2, w.end()));
  e.attr_ints(e.last_, "strides", per_dim(3, 1));
  std::vector<int64_t> p = per_dim(4, 0);
  p.insert(p.end(), p.begin(), p.end());
  e.attr_ints(e.last_, "pads", p);
  e.attr_ints(e.last_, "dilations", per_dim(5, 1));
  e.attr_i(e.last_, "group", static_cast<int64_t>(e.num_arg(n, general ? 8 : 6, 1)));
  if (transposed) e.attr_ints(e.last_, "output_padding", per_dim(7, 0));
  e.names_[&n] = y;
  e.rank_[&n] = static_cast<int>(w.size());
}

// _native_batch_norm_legit_no_training(x, w?, b?, mean, var, momentum, eps) and
// batch_norm(x, w?, b?, mean, var, training, momentum, eps, cudnn) in eval: ONNX
// BatchNormalization (a missing weight / bias: ones / zeros).
void batch_norm_function(Exporter& e, fx::Node& n) {
  const bool legit = n.target().find("_native_batch_norm_legit") != std::string::npos;
  if (!legit && e.num_arg(n, 5, 0) != 0) unsupported(n, "batch_norm in training mode");
  const std::vector<int64_t> c = dims_static(e, n, n.args().at(3));
  auto param = [&](size_t i, double fill, const char* hint) {
    std::string v = optional_value(e, n, i);
    return v.empty() ? e.init(hint, at::full(c, fill, at::kFloat)) : v;
  };
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("BatchNormalization", {e.value(n, n.args().at(0)), param(1, 1.0, "bn_scale"), param(2, 0.0, "bn_bias"),
                                          e.operand(n, n.args().at(3)), e.operand(n, n.args().at(4))}, y, n.name());
  e.attr_f(e.last_, "epsilon", static_cast<float>(e.num_arg(n, legit ? 6 : 7, 1e-5)));
  e.names_[&n] = y;
  e.rank_[&n] = e.rank_of(n.args().at(0));
  if (legit) e.tuple_items_[&n] = {y};
}

// addmm(bias, x, m, beta=1, alpha=1) as a function: ONNX Gemm(x, m, bias).
void addmm_function(Exporter& e, fx::Node& n) {
  const std::string y = e.fresh(n.name());
  e.last_ = e.node("Gemm", {e.value(n, n.args().at(1)), e.operand(n, n.args().at(2)), e.operand(n, n.args().at(0))}, y, n.name());
  double beta = e.num_arg(n, 3, 1.0), alpha = e.num_arg(n, 4, 1.0);
  for (const auto& [k, a] : n.kwargs())
    if (a.is_const() && (a.value.isInt() || a.value.isDouble())) (k == "beta" ? beta : alpha) = a.value.toDouble();
  if (alpha != 1.0) e.attr_f(e.last_, "alpha", static_cast<float>(alpha));
  if (beta != 1.0) e.attr_f(e.last_, "beta", static_cast<float>(beta));
  e.names_[&n] = y;
  e.rank_[&n] = 2;
}

// matmul / mm / bmm between two activations.
void matmul(Exporter& e, fx::Node& n) {
  const std::string y = e.fresh(n.name());
  e.node("MatMul", {e.value(n, n.args().at(0)), e.value(n, n.args().at(1))}, y, n.name());
  e.names_[&n] = y;
  e.rank_[&n] = std::max(e.rank_of(n.args().at(0)), e.rank_of(n.args().at(1)));
}

}  // namespace

void Exporter::weighted(fx::Node* n, const QuantizedConvLinear& f) {
  const fx::Argument& xa = n->args().at(0);
  const std::string& x = value(*n, xa);
  const int r = rank_of(xa);
  // A linear on an input of rank other than 2 is x @ W^T + b (MatMul, then Add):
  // W^T is stored, so the MatMul's B is a (per-channel: axis 1) dequantized constant.
  const bool matmul = f.op() == FusedConvLinear::Op::kLinear && r != 2;
  std::string wname, bname;
  if (f.weight_quantized() && !opt_.float_model) {
    quantized_weight(*this, *n, f, matmul, &wname, &bname);
  } else {
    wname = init(n->name() + "_weight", matmul ? f.weight().t().contiguous() : f.weight());
  }
  if (bname.empty()) bname = init(n->name() + "_bias", f.bias_float());
  std::string y = fresh(n->name());
  if (f.op() == FusedConvLinear::Op::kLinear) {
    if (!matmul) {
      auto* p = node("Gemm", {x, wname, bname}, y, n->name());
      attr_i(p, "transB", 1);
    } else {  // any rank: x @ W^T + b
      const std::string mm = fresh(n->name() + "_matmul");
      node("MatMul", {x, wname}, mm, mm);
      node("Add", {mm, bname}, y, n->name());
    }
  } else {
    conv(*this, *n, f, x, wname, bname, y);
  }
  y = activation(n, y, f.activation());
  names_[n] = y;
  rank_[n] = r;
}

std::string Exporter::activation(fx::Node* n, const std::string& x, FusedActivation a) {
  if (a == FusedActivation::kNone) return x;
  const std::string y = fresh(n->name() + "_act");
  if (a == FusedActivation::kReLU) {
    node("Relu", {x}, y, y);
  } else {
    node("Clip", {x, init("zero", at::full({}, 0.0f)), init("six", at::full({}, 6.0f))}, y, y);
  }
  return y;
}

void register_layer_ops(OpCatalog& c) {
  const std::vector<std::pair<std::string, std::string>> convs = {
      {"conv1d", "Conv1d"}, {"conv2d", "Conv2d"}, {"conv3d", "Conv3d"}, {"conv_transpose2d", "ConvTranspose2d"}};
  for (const auto& [name, cls] : convs)
    c.add(OpRecord(name).also_modules({cls}).quantized_as(weighted_kinds()).fuses_as(FusionRole::kWeightedHead)
              .describe("convolution (ONNX Conv / ConvTranspose)")
              .writes({"Conv", "ConvTranspose"}).to_onnx(conv_function, float_layer));
  c.add(OpRecord("convolution").describe("convolution, transposed or not, called as a function (ONNX Conv / ConvTranspose)")
            .writes({"Conv", "ConvTranspose"}).to_onnx(conv_function));
  c.add(OpRecord("addmm").describe("beta * bias + alpha * (x @ m) called as a function (ONNX Gemm)").reads_kwargs({"beta", "alpha"})
            .writes({"Gemm"}).to_onnx(addmm_function));
  c.add(OpRecord("_native_batch_norm_legit_no_training").describe("inference batch norm as a function (ONNX BatchNormalization)")
            .writes({"BatchNormalization"}).to_onnx(batch_norm_function));
  c.add(OpRecord("linear").also_modules({"Linear"}).quantized_as(weighted_kinds()).fuses_as(FusionRole::kWeightedHead)
            .describe("x W^T + b (ONNX Gemm for 2-D input, else MatMul + Add)")
            .writes({"Gemm", "MatMul", "Add", "Transpose", "DequantizeLinear"}).to_onnx(functional_linear, float_layer));
  c.add(OpRecord("batchnorm1d").also_modules({"BatchNorm1d"}).quantized_as(activation_kinds()).fuses_as(FusionRole::kBatchNorm)
            .describe("batch norm: folded into the conv / linear before it, else ONNX BatchNormalization in float")
            .writes({"BatchNormalization"}).to_onnx(batch_norm_function, batch_norm_module));
  c.add(OpRecord("batchnorm2d").also_modules({"BatchNorm2d"}).also_aten({"batch_norm"}).quantized_as(activation_kinds())
            .fuses_as(FusionRole::kBatchNorm)
            .describe("batch norm: folded into the conv before it, else ONNX BatchNormalization in float")
            .writes({"BatchNormalization"}).to_onnx(batch_norm_function, batch_norm_module));
  c.add(OpRecord("batchnorm3d").also_modules({"BatchNorm3d"}).quantized_as(activation_kinds()).fuses_as(FusionRole::kBatchNorm)
            .describe("batch norm: folded into the conv before it, else ONNX BatchNormalization in float")
            .writes({"BatchNormalization"}).to_onnx(batch_norm_function, batch_norm_module));
  c.add(OpRecord("matmul").also_aten({"mm", "bmm"}).quantized_as(activation_kinds())
            .describe("matrix product of two activations (ONNX MatMul)").writes({"MatMul"}).to_onnx(matmul));
}

}  // namespace qfx::quant::detail
