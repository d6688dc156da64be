// Reference kernel: LayerNormalization in float (ONNX opset 17, onnx.ai/onnx/operators):
// over the dims from `axis` on, Y = (X - mean) / sqrt(var + epsilon) * Scale + B, with
// Scale and B broadcast to those dims; the optional Mean and InvStdDev outputs have the
// input's shape with the normalized dims as 1. Statistics in double.
#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

Kernel layer_norm(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) {
  const Shape& x = in[0].shape;
  if (x.empty()) bad_shape(n, "input of rank 0");
  const int64_t axis = norm_axis(n, n.attr_i("axis", -1), x.size());
  if (n.attr_i("stash_type", 1) != 1) unsupported(n, "stash_type " + std::to_string(n.attr_i("stash_type", 1)) + " (1, float, only)");
  const Shape norm(x.begin() + axis, x.end());
  const bool has_bias = in.size() > 2 && has_input(n, 2);
  for (size_t t = 1; t < (has_bias ? 3u : 2u); ++t) {
    check_dtype(n, in[t].dtype, {DType::kFloat32}, t == 1 ? "Scale" : "B");
    if (broadcast(n, in[t].shape, norm) != norm)
      bad_shape(n, std::string(t == 1 ? "Scale " : "B ") + shape_str(in[t].shape) + " does not broadcast to " + shape_str(norm));
  }
  const Shape s_shape = in[1].shape, b_shape = has_bias ? in[2].shape : Shape{1};
  const int64_t rows = numel(Shape(x.begin(), x.begin() + axis)), cols = numel(norm);
  const float eps = n.attr_f("epsilon", 1e-5f);
  Shape stat = x;
  for (size_t d = static_cast<size_t>(axis); d < x.size(); ++d) stat[d] = 1;
  Kernel k;
  k.outputs = {{x, DType::kFloat32}, {stat, DType::kFloat32}, {stat, DType::kFloat32}};
  k.run = [=](const In& i, const Out& o) {
    const float* xp = i[0]->data<float>();
    const float* sc = i[1]->data<float>();
    const float* b = has_bias ? i[2]->data<float>() : nullptr;
    float* y = o[0] ? o[0]->data<float>() : nullptr;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = xp + r * cols;
      double sum = 0, sq = 0;
      for (int64_t c = 0; c < cols; ++c) sum += row[c];
      const double mean = cols > 0 ? sum / static_cast<double>(cols) : 0;
      for (int64_t c = 0; c < cols; ++c) sq += (row[c] - mean) * (row[c] - mean);
      const double inv = 1.0 / std::sqrt((cols > 0 ? sq / static_cast<double>(cols) : 0) + eps);
      if (o.size() > 1 && o[1]) o[1]->data<float>()[r] = static_cast<float>(mean);
      if (o.size() > 2 && o[2]) o[2]->data<float>()[r] = static_cast<float>(inv);
      if (!y) continue;
      float* y_row = y + r * cols;
      for_each_broadcast(norm, s_shape, b_shape, [&](int64_t c, int64_t is, int64_t ib) {
        y_row[c] = static_cast<float>((row[c] - mean) * inv) * sc[is] + (b ? b[ib] : 0.0f);
      });
    }
  };
  return k;
}

}  // namespace

void register_reference_norm() { add_reference({"LayerNormalization"}, layer_norm); }

}  // namespace qfx::runtime
