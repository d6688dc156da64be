// The op catalog's group_norm and instance_norm, as the ONNX ops qfx's
// runtime and every ONNX runtime run at opset 13 (GroupNormalization is opset 18):
//   group_norm(x [N, C, ...], G):  Reshape to [N, G, -1], normalise over the last axis,
//                                  Reshape back (Shape of x);
//   instance_norm(x [N, C, ...]):  normalise over the spatial axes 2.. (statistics of
//                                  the input, as in eval mode without running stats);
// then y * weight + bias with [C] weight and bias reshaped to [C, 1, ...].
#include "exporter.h"
#include "op_families.h"

namespace qfx::quant::detail {

void Exporter::channel_affine(fx::Node* n, std::string y, const fx::Argument* weight, const fx::Argument* bias, int rank) {
  const std::string b = n->name();
  std::vector<int64_t> shape(static_cast<size_t>(std::max(rank - 1, 1)), 1);
  shape[0] = -1;
  auto per_channel = [&](const fx::Argument* a, const char* what) -> std::string {
    if (!a || (a->is_const() && a->value.isNone())) return "";
    const std::string v = fresh(b + "_" + what);
    node("Reshape", {operand(*n, *a), ints_init(b + "_" + what + "_shape", shape)}, v, v);
    return v;
  };
  const std::string w = per_channel(weight, "weight"), c = per_channel(bias, "bias");
  if (!w.empty()) y = two_input("Mul", y, w, b + "_scaled");
  if (!c.empty()) y = two_input("Add", y, c, b + "_shifted");
  names_[n] = y;
  rank_[n] = rank;
}

namespace {

void norm(Exporter& ex, fx::Node& node, bool group) {
  fx::Node* n = &node;
  auto arg = [&](size_t i) -> const fx::Argument* { return n->args().size() > i ? &n->args()[i] : nullptr; };
  const int known = ex.rank_of(n->args().at(0));
  const int rank = known >= 0 ? known : static_cast<int>(ex.dims_of(*n, n->args().at(0)).size());
  if (group) {  // aten::group_norm(x, num_groups, weight?, bias?, eps, cudnn)
    if (rank < 3) unsupported(*n, "group_norm of a tensor of rank " + std::to_string(rank) + " (expected [N, C, ...])");
    const int64_t groups = static_cast<int64_t>(ex.num_arg(*n, 1, 1));
    const std::string x = ex.value(*n, n->args().at(0)), b = n->name();
    const std::string grouped = ex.fresh(b + "_grouped"), shape = ex.fresh(b + "_shape"), back = ex.fresh(b + "_ungrouped");
    ex.node("Reshape", {x, ex.ints_init(b + "_group_shape", {0, groups, -1})}, grouped, grouped);
    ex.node("Shape", {x}, shape, shape);
    ex.node("Reshape", {ex.normalize(grouped, b, {-1}, ex.num_arg(*n, 4, 1e-5)), shape}, back, back);
    ex.channel_affine(n, back, arg(2), arg(3), rank);
    return;
  }
  {  // aten::instance_norm(x, weight?, bias?, mean?, var?, use_input_stats, momentum, eps, cudnn)
    if (rank < 3) unsupported(*n, "instance_norm of a tensor of rank " + std::to_string(rank) + " (expected [N, C, ...])");
    if (ex.num_arg(*n, 5, 1) == 0) unsupported(*n, "instance_norm with running statistics (track_running_stats in eval mode)");
    std::vector<int64_t> axes;
    for (int d = 2; d < rank; ++d) axes.push_back(d);
    ex.channel_affine(n, ex.normalize(ex.value(*n, n->args().at(0)), n->name(), axes, ex.num_arg(*n, 7, 1e-5)), arg(1), arg(2), rank);
    return;
  }
}

}  // namespace

void register_norm_ops(OpCatalog& c) {
  c.add(OpRecord("group_norm").quantized_as(activation_kinds())
            .describe("normalisation per group of channels, then the per-channel affine")
            .to_onnx([](Exporter& e, fx::Node& n) { norm(e, n, true); }));
  c.add(OpRecord("instance_norm").quantized_as(activation_kinds())
            .describe("normalisation per channel, then the per-channel affine")
            .to_onnx([](Exporter& e, fx::Node& n) { norm(e, n, false); }));
}

}  // namespace qfx::quant::detail
