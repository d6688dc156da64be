// The op catalog's normalisations, as the ONNX ops qfx's runtime and every ONNX
// runtime run at opset 13 (LayerNormalization is opset 17, GroupNormalization 18):
//   layer_norm(x, shape):          normalise over the last len(shape) axes;
//   group_norm(x [N, C, ...], G):  Reshape to [N, G, -1], normalise over the last axis,
//                                  Reshape back (Shape of x);
//   instance_norm(x [N, C, ...]):  normalise over the spatial axes 2.. (statistics of
//                                  the input, as in eval mode without running stats);
// then y * weight + bias with [C] weight and bias reshaped to [C, 1, ...].
#include <torch/nn/modules/normalization.h>

#include "export_shape.h"
#include "op_families.h"

namespace qfx::quant::detail {
namespace {

// (x - mean) / sqrt(var + eps) over `axes` of value `x` (statistics kept per the
// other axes); returns the result's value.
std::string normalize(Exporter& ex, const std::string& x, const std::string& b, const std::vector<int64_t>& axes, double eps) {
  auto reduce = [&](const std::string& in, const std::string& name) {
    const std::string y = ex.fresh(name);
    auto* p = ex.node("ReduceMean", {in}, y, y);
    ex.reduce_axes(p, axes);
    ex.attr_i(p, "keepdims", 1);
    return y;
  };
  const std::string mean = reduce(x, b + "_mean");
  const std::string d = ex.two_input("Sub", x, mean, b + "_centered");
  const std::string var = reduce(ex.two_input("Mul", d, d, b + "_square"), b + "_var");
  const std::string den = ex.fresh(b + "_std");
  ex.node("Sqrt", {ex.two_input("Add", var, ex.init(b + "_eps", at::full({}, static_cast<float>(eps))), b + "_var_eps")}, den, den);
  return ex.two_input("Div", d, den, b + "_normalized");
}

// LayerNorm of n's input over the last `dims` axes; weight / bias: ONNX value names or empty.
void layer_norm(Exporter& ex, fx::Node* n, int64_t dims, const std::string& weight, const std::string& bias, double eps) {
  std::vector<int64_t> axes;
  for (int64_t d = -dims; d < 0; ++d) axes.push_back(d);
  const std::string b = n->name();
  std::string y = normalize(ex, ex.value(*n, n->args().at(0)), b, axes, eps);
  if (!weight.empty()) y = ex.two_input("Mul", y, weight, b + "_scaled");
  if (!bias.empty()) y = ex.two_input("Add", y, bias, b + "_shifted");
  ex.names_[n] = y;
  ex.rank_[n] = ex.rank_of(n->args().at(0));
}

// aten::layer_norm(x, normalized_shape, weight?, bias?, eps, cudnn)
void layer_norm_function(Exporter& e, fx::Node& n) {
  auto opt = [&](size_t i) {
    return n.args().size() > i && !(n.args().at(i).is_const() && n.args().at(i).value.isNone()) ? e.operand(n, n.args().at(i))
                                                                                                  : std::string();
  };
  layer_norm(e, &n, static_cast<int64_t>(e.ints_arg(n, 1).size()), opt(2), opt(3), e.num_arg(n, 4, 1e-5));
}

void layer_norm_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* ln = dynamic_cast<torch::nn::LayerNormImpl*>(&m);
  if (!ln) unsupported(n, "module 'layer_norm' has no ONNX export in qfx yet");
  const auto& o = ln->options;
  const bool affine = o.elementwise_affine() && ln->weight.defined();
  layer_norm(e, &n, static_cast<int64_t>(o.normalized_shape().size()),
             affine ? e.init(n.name() + "_weight", ln->weight.detach().to(at::kFloat)) : std::string(),
             affine && ln->bias.defined() ? e.init(n.name() + "_bias", ln->bias.detach().to(at::kFloat)) : std::string(), o.eps());
}

// The per-channel affine ([C] weight and bias broadcast over [N, C, ...]) after a
// normalisation of rank `rank` (GroupNorm, InstanceNorm).
void channel_affine(Exporter& ex, fx::Node* n, std::string y, const fx::Argument* weight, const fx::Argument* bias, int rank) {
  const std::string b = n->name();
  std::vector<int64_t> shape(static_cast<size_t>(std::max(rank - 1, 1)), 1);
  shape[0] = -1;
  auto per_channel = [&](const fx::Argument* a, const char* what) -> std::string {
    if (!a || (a->is_const() && a->value.isNone())) return "";
    const std::string v = ex.fresh(b + "_" + what);
    ex.node("Reshape", {ex.operand(*n, *a), ex.ints_init(b + "_" + what + "_shape", shape)}, v, v);
    return v;
  };
  const std::string w = per_channel(weight, "weight"), c = per_channel(bias, "bias");
  if (!w.empty()) y = ex.two_input("Mul", y, w, b + "_scaled");
  if (!c.empty()) y = ex.two_input("Add", y, c, b + "_shifted");
  ex.names_[n] = y;
  ex.rank_[n] = rank;
}

void norm(Exporter& ex, fx::Node& node, bool group) {
  fx::Node* n = &node;
  auto arg = [&](size_t i) -> const fx::Argument* { return n->args().size() > i ? &n->args()[i] : nullptr; };
  const int known = ex.rank_of(n->args().at(0));
  const int rank = known >= 0 ? known : static_cast<int>(dims_of(ex, *n, n->args().at(0)).size());
  // aten::group_norm(x, num_groups, weight?, bias?, eps, cudnn) and
  // native_group_norm(x, weight?, bias?, N, C, HxW, group, eps)
  const bool native = n->target().rfind("aten::native_group_norm", 0) == 0;
  if (group) {
    if (rank < 3) unsupported(*n, "group_norm of a tensor of rank " + std::to_string(rank) + " (expected [N, C, ...])");
    const int64_t groups = static_cast<int64_t>(ex.num_arg(*n, native ? 6 : 1, 1));
    const std::string x = ex.value(*n, n->args().at(0)), b = n->name();
    const std::string grouped = ex.fresh(b + "_grouped"), shape = ex.fresh(b + "_shape"), back = ex.fresh(b + "_ungrouped");
    ex.node("Reshape", {x, ex.ints_init(b + "_group_shape", {0, groups, -1})}, grouped, grouped);
    ex.node("Shape", {x}, shape, shape);
    ex.node("Reshape", {normalize(ex, grouped, b, {-1}, ex.num_arg(*n, native ? 7 : 4, 1e-5)), shape}, back, back);
    channel_affine(ex, n, back, arg(native ? 1 : 2), arg(native ? 2 : 3), rank);
    if (native) ex.tuple_items_[n] = {ex.names_[n]};
    return;
  }
  {  // aten::instance_norm(x, weight?, bias?, mean?, var?, use_input_stats, momentum, eps, cudnn)
    if (rank < 3) unsupported(*n, "instance_norm of a tensor of rank " + std::to_string(rank) + " (expected [N, C, ...])");
    if (ex.num_arg(*n, 5, 1) == 0) unsupported(*n, "instance_norm with running statistics (track_running_stats in eval mode)");
    std::vector<int64_t> axes;
    for (int d = 2; d < rank; ++d) axes.push_back(d);
    channel_affine(ex, n, normalize(ex, ex.value(*n, n->args().at(0)), n->name(), axes, ex.num_arg(*n, 7, 1e-5)), arg(1), arg(2), rank);
    return;
  }
}

}  // namespace

void register_norm_ops(OpCatalog& c) {
  const std::vector<std::string> normalize_ops = {"ReduceMean", "Sub", "Mul", "Add", "Sqrt", "Div"};
  c.add(OpRecord("layer_norm").also_modules({"LayerNorm"}).quantized_as(activation_kinds())
            .describe("normalisation over the last dims, decomposed into opset-14 ops")
            .as_integer_only("LayerNormalization").writes(normalize_ops).to_onnx(layer_norm_function, layer_norm_module));
  c.add(OpRecord("group_norm").quantized_as(activation_kinds())
            .describe("normalisation per group of channels, then the per-channel affine")
            .writes(normalize_ops).writes({"Reshape", "Shape"})
            .to_onnx([](Exporter& e, fx::Node& n) { norm(e, n, true); }));
  c.add(OpRecord("native_group_norm").describe("group_norm's Core ATen form (output 0: the normalised tensor)")
            .writes(normalize_ops).writes({"Reshape", "Shape"})
            .to_onnx([](Exporter& e, fx::Node& n) { norm(e, n, true); }));
  c.add(OpRecord("native_layer_norm").describe("layer_norm's Core ATen form (output 0: the normalised tensor)")
            .writes(normalize_ops).to_onnx([](Exporter& e, fx::Node& n) {
              layer_norm_function(e, n);
              e.tuple_items_[&n] = {e.names_[&n]};
            }));
  c.add(OpRecord("instance_norm").quantized_as(activation_kinds())
            .describe("normalisation per channel, then the per-channel affine")
            .writes(normalize_ops).writes({"Reshape"})
            .to_onnx([](Exporter& e, fx::Node& n) { norm(e, n, false); }));
}

}  // namespace qfx::quant::detail
