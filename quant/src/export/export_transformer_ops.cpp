// The op catalog's transformer ops (nn.TransformerEncoder, MultiheadAttention,
// ViT): F.linear on a parameter, LayerNorm and
// GELU decomposed into opset-14 ops (LayerNormalization is opset 17, Gelu opset
// 20), permute.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>

#include "exporter.h"
#include "op_families.h"

namespace qfx::quant::detail {

void Exporter::functional_linear(fx::Node* n) {
  // y = x W^T + b: MatMul with Transpose(W) (folded at load when W is a parameter);
  // a quantized parameter (prepare_fx's weight FakeQuantize, converted) as the
  // DequantizeLinear of its codes, stored transposed (per channel: axis 1).
  std::string wt;
  const fx::Argument& wa = n->args().at(1);
  if (!opt_.float_model && wa.is_node() && weight_of_functional_linear(wa.node)) {
    const auto* qd = dynamic_cast<const QuantDequant*>(gm_.get_submodule(wa.node->target()).get());
    if (!qd) unsupported(*n, "internal: the weight of a quantized functional linear is not a QuantDequant");
    const QParams& q = qd->qparams();
    const at::Tensor w = gm_.get_attr(wa.node->args()[0].node->target()).detach().to(at::kFloat);
    const at::Tensor codes = quantize_weight_codes(w, q, /*axis=*/0).t().contiguous();
    const std::vector<int64_t> vec = q.per_channel ? std::vector<int64_t>{-1} : std::vector<int64_t>{};
    const std::string ci = init(n->name() + "_weight_q", codes);
    const std::string cs = init(n->name() + "_weight_scale", q.scale.to(at::kFloat).reshape(vec));
    const std::string cz = init(n->name() + "_weight_zero_point", zero_points(q).reshape(vec));
    wt = fresh(n->name() + "_weight");
    auto* dn = node("DequantizeLinear", {ci, cs, cz}, wt, wt);
    if (q.per_channel) attr_i(dn, "axis", 1);
    ++res_.quantized_weights;
  } else {
    wt = fresh(n->name() + "_weight_t");
    node("Transpose", {value(*n, wa)}, wt, wt);
  }
  std::string y = fresh(n->name());
  node("MatMul", {value(*n, n->args().at(0)), wt}, y, n->name());
  if (n->args().size() > 2 && !(n->args().at(2).is_const() && n->args().at(2).value.isNone())) {
    const std::string yb = fresh(n->name() + "_bias");
    node("Add", {y, operand(*n, n->args().at(2))}, yb, yb);
    y = yb;
  }
  names_[n] = y;
  rank_[n] = rank_of(n->args().at(0));
}

namespace {

// aten::layer_norm(x, normalized_shape, weight?, bias?, eps, cudnn)
void layer_norm(Exporter& e, fx::Node& n) {
  auto opt = [&](size_t i) {
    return n.args().size() > i && !(n.args().at(i).is_const() && n.args().at(i).value.isNone()) ? e.operand(n, n.args().at(i))
                                                                                                  : std::string();
  };
  e.layer_norm(&n, static_cast<int64_t>(e.ints_arg(n, 1).size()), opt(2), opt(3), e.num_arg(n, 4, 1e-5));
}

void layer_norm_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* ln = dynamic_cast<torch::nn::LayerNormImpl*>(&m);
  if (!ln) unsupported(n, "module 'layer_norm' has no ONNX export in qfx yet");
  const auto& o = ln->options;
  const bool affine = o.elementwise_affine() && ln->weight.defined();
  e.layer_norm(&n, static_cast<int64_t>(o.normalized_shape().size()),
               affine ? e.init(n.name() + "_weight", ln->weight.detach().to(at::kFloat)) : std::string(),
               affine && ln->bias.defined() ? e.init(n.name() + "_bias", ln->bias.detach().to(at::kFloat)) : std::string(), o.eps());
}

void gelu(Exporter& e, fx::Node& n) {
  const fx::Argument* a = n.args().size() > 1 ? &n.args().at(1) : nullptr;
  for (const auto& kv : n.kwargs())
    if (kv.first == "approximate") a = &kv.second;
  e.gelu(&n, a && a->is_const() && a->value.isString() && a->value.toStringRef() == "tanh");
}

void gelu_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* g = dynamic_cast<torch::nn::GELUImpl*>(&m);
  if (!g) unsupported(n, "module 'gelu' has no ONNX export in qfx yet");
  e.gelu(&n, g->options.approximate() == "tanh");
}

void permute(Exporter& e, fx::Node& n) {
  const int r = e.rank_of(n.args().at(0));
  std::vector<int64_t> perm = e.ints_arg(n, 1);
  for (auto& d : perm)
    if (d < 0) {
      if (r < 0) unsupported(n, "permute with negative dims of an input of unknown rank");
      d += r;
    }
  e.unary(&n, "Transpose");
  e.attr_ints(e.last_, "perm", perm);
}

}  // namespace

void register_transformer_ops(OpCatalog& c) {
  c.add(OpRecord("layer_norm").also_modules({"LayerNorm"}).quantized_as(activation_kinds())
            .describe("normalisation over the last dims, decomposed into opset-14 ops")
            .as_integer_only("LayerNormalization").to_onnx(layer_norm, layer_norm_module));
  c.add(OpRecord("gelu").also_modules({"GELU"}).quantized_as(activation_kinds())
            .describe("GELU (erf or tanh form), decomposed into opset-14 ops").as_integer_only("Gelu").to_onnx(gelu, gelu_module));
  c.add(OpRecord("permute").quantized_as(activation_kinds()).describe("ONNX Transpose").to_onnx(permute));
}

std::string Exporter::two_input(const char* op, const std::string& a, const std::string& b, const std::string& name) {
  const std::string y = fresh(name);
  node(op, {a, b}, y, y);
  return y;
}

void Exporter::layer_norm(fx::Node* n, int64_t dims, const std::string& weight, const std::string& bias, double eps) {
  // (x - mean) / sqrt(var + eps) * weight + bias over the last `dims` axes.
  std::vector<int64_t> axes;
  for (int64_t d = -dims; d < 0; ++d) axes.push_back(d);
  const std::string b = n->name();
  std::string y = normalize(value(*n, n->args().at(0)), b, axes, eps);
  if (!weight.empty()) y = two_input("Mul", y, weight, b + "_scaled");
  if (!bias.empty()) y = two_input("Add", y, bias, b + "_shifted");
  names_[n] = y;
  rank_[n] = rank_of(n->args().at(0));
}

std::string Exporter::normalize(const std::string& x, const std::string& b, const std::vector<int64_t>& axes, double eps) {
  auto reduce = [&](const std::string& in, const std::string& name) {
    const std::string y = fresh(name);
    auto* p = node("ReduceMean", {in}, y, y);
    attr_ints(p, "axes", axes);
    attr_i(p, "keepdims", 1);
    return y;
  };
  const std::string mean = reduce(x, b + "_mean");
  const std::string d = two_input("Sub", x, mean, b + "_centered");
  const std::string var = reduce(two_input("Mul", d, d, b + "_square"), b + "_var");
  const std::string den = fresh(b + "_std");
  node("Sqrt", {two_input("Add", var, init(b + "_eps", at::full({}, static_cast<float>(eps))), b + "_var_eps")}, den, den);
  return two_input("Div", d, den, b + "_normalized");
}

void Exporter::gelu(fx::Node* n, bool tanh) {
  const std::string x = value(*n, n->args().at(0)), b = n->name();
  auto constant = [&](const std::string& name, double v) { return init(name, at::full({}, static_cast<float>(v))); };
  std::string inner;
  if (tanh) {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    const std::string x3 = two_input("Mul", two_input("Mul", x, x, b + "_x2"), x, b + "_x3");
    const std::string s = two_input("Add", x, two_input("Mul", x3, constant(b + "_c", 0.044715), b + "_cx3"), b + "_sum");
    inner = fresh(b + "_tanh");
    node("Tanh", {two_input("Mul", s, constant(b + "_k", std::sqrt(2.0 / M_PI)), b + "_arg")}, inner, inner);
  } else {  // 0.5 x (1 + erf(x / sqrt(2)))
    inner = fresh(b + "_erf");
    node("Erf", {two_input("Div", x, constant(b + "_sqrt2", std::sqrt(2.0)), b + "_scaled")}, inner, inner);
  }
  const std::string one = two_input("Add", inner, constant(b + "_one", 1.0), b + "_one_plus");
  names_[n] = two_input("Mul", two_input("Mul", x, one, b + "_x_times"), constant(b + "_half", 0.5), b);
  rank_[n] = rank_of(n->args().at(0));
}

}  // namespace qfx::quant::detail
