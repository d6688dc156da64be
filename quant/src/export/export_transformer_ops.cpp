// The op catalog's transformer ops (nn.TransformerEncoder, MultiheadAttention,
// ViT) beside linear and layer_norm: GELU decomposed into opset-14 ops (Gelu is
// opset 20), and permute.
#include <torch/nn/modules/activation.h>

#include <cmath>

#include "exporter.h"
#include "op_families.h"

namespace qfx::quant::detail {
namespace {

// GELU of n's input, the erf form or (tanh) the tanh approximation.
void gelu(Exporter& ex, fx::Node* n, bool tanh) {
  const std::string x = ex.value(*n, n->args().at(0)), b = n->name();
  auto constant = [&](const std::string& name, double v) { return ex.init(name, at::full({}, static_cast<float>(v))); };
  std::string inner;
  if (tanh) {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    const std::string x3 = ex.two_input("Mul", ex.two_input("Mul", x, x, b + "_x2"), x, b + "_x3");
    const std::string s = ex.two_input("Add", x, ex.two_input("Mul", x3, constant(b + "_c", 0.044715), b + "_cx3"), b + "_sum");
    inner = ex.fresh(b + "_tanh");
    ex.node("Tanh", {ex.two_input("Mul", s, constant(b + "_k", std::sqrt(2.0 / M_PI)), b + "_arg")}, inner, inner);
  } else {  // 0.5 x (1 + erf(x / sqrt(2)))
    inner = ex.fresh(b + "_erf");
    ex.node("Erf", {ex.two_input("Div", x, constant(b + "_sqrt2", std::sqrt(2.0)), b + "_scaled")}, inner, inner);
  }
  const std::string one = ex.two_input("Add", inner, constant(b + "_one", 1.0), b + "_one_plus");
  ex.names_[n] = ex.two_input("Mul", ex.two_input("Mul", x, one, b + "_x_times"), constant(b + "_half", 0.5), b);
  ex.rank_[n] = ex.rank_of(n->args().at(0));
}

// aten::gelu(x, approximate="none")
void gelu_function(Exporter& e, fx::Node& n) {
  const fx::Argument* a = n.args().size() > 1 ? &n.args().at(1) : nullptr;
  for (const auto& kv : n.kwargs())
    if (kv.first == "approximate") a = &kv.second;
  gelu(e, &n, a && a->is_const() && a->value.isString() && a->value.toStringRef() == "tanh");
}

void gelu_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* g = dynamic_cast<torch::nn::GELUImpl*>(&m);
  if (!g) unsupported(n, "module 'gelu' has no ONNX export in qfx yet");
  gelu(e, &n, g->options.approximate() == "tanh");
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
  c.add(OpRecord("gelu").also_modules({"GELU"}).reads_kwargs({"approximate"}).quantized_as(activation_kinds())
            .describe("GELU (erf or tanh form), decomposed into opset-14 ops").as_integer_only("Gelu")
            .writes({"Mul", "Add", "Div", "Tanh", "Erf"}).to_onnx(gelu_function, gelu_module));
  c.add(OpRecord("permute").quantized_as(activation_kinds()).describe("ONNX Transpose").writes({"Transpose"}).to_onnx(permute));
}

}  // namespace qfx::quant::detail
