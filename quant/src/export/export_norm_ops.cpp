// export_onnx's GroupNorm and InstanceNorm (see exporter.h), as the ONNX ops qfx's
// runtime and every ONNX runtime run at opset 13 (GroupNormalization is opset 18):
//   group_norm(x [N, C, ...], G):  Reshape to [N, G, -1], normalise over the last axis,
//                                  Reshape back (Shape of x);
//   instance_norm(x [N, C, ...]):  normalise over the spatial axes 2.. (statistics of
//                                  the input, as in eval mode without running stats);
// then y * weight + bias with [C] weight and bias reshaped to [C, 1, ...].
#include "exporter.h"

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

bool Exporter::norm_function(fx::Node* n, const std::string& op) {
  auto arg = [&](size_t i) -> const fx::Argument* { return n->args().size() > i ? &n->args()[i] : nullptr; };
  if (op != "group_norm" && op != "instance_norm") return false;
  const int known = rank_of(n->args().at(0));
  const int rank = known >= 0 ? known : static_cast<int>(dims_of(*n, n->args().at(0)).size());
  if (op == "group_norm") {  // aten::group_norm(x, num_groups, weight?, bias?, eps, cudnn)
    if (rank < 3) unsupported(*n, "group_norm of a tensor of rank " + std::to_string(rank) + " (expected [N, C, ...])");
    const int64_t groups = static_cast<int64_t>(num_arg(*n, 1, 1));
    const std::string x = value(*n, n->args().at(0)), b = n->name();
    const std::string grouped = fresh(b + "_grouped"), shape = fresh(b + "_shape"), back = fresh(b + "_ungrouped");
    node("Reshape", {x, ints_init(b + "_group_shape", {0, groups, -1})}, grouped, grouped);
    node("Shape", {x}, shape, shape);
    node("Reshape", {normalize(grouped, b, {-1}, num_arg(*n, 4, 1e-5)), shape}, back, back);
    channel_affine(n, back, arg(2), arg(3), rank);
    return true;
  }
  if (op == "instance_norm") {  // aten::instance_norm(x, weight?, bias?, mean?, var?, use_input_stats, momentum, eps, cudnn)
    if (rank < 3) unsupported(*n, "instance_norm of a tensor of rank " + std::to_string(rank) + " (expected [N, C, ...])");
    if (num_arg(*n, 5, 1) == 0) unsupported(*n, "instance_norm with running statistics (track_running_stats in eval mode)");
    std::vector<int64_t> axes;
    for (int d = 2; d < rank; ++d) axes.push_back(d);
    channel_affine(n, normalize(value(*n, n->args().at(0)), n->name(), axes, num_arg(*n, 7, 1e-5)), arg(1), arg(2), rank);
    return true;
  }
  return false;
}

}  // namespace qfx::quant::detail
