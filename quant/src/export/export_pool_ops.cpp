// export_onnx's adaptive average pooling (see exporter.h). ONNX has no adaptive
// pooling: 1x1 is GlobalAveragePool; an output size that divides the input's
// (static) spatial size is AveragePool with kernel = stride = input / output
// (PyTorch's windows are exactly those then); any other size is the exact
// pooling as a matrix product, input [N, C, H*W] x P [H*W, oh*ow], where P's column
// for output cell (i, j) holds 1/|window| over PyTorch's window rows
// [floor(i*H/oh), ceil((i+1)*H/oh)) and columns likewise (float between DQ and Q).
#include "exporter.h"

namespace qfx::quant::detail {

void Exporter::adaptive_avg_pool(fx::Node* n, std::vector<int64_t> out) {
  if (out.size() == 1) out.push_back(out[0]);
  if (out.size() != 2) unsupported(*n, "adaptive average pooling with an output size of rank " + std::to_string(out.size()));
  if (out[0] == 1 && out[1] == 1) return unary(n, "GlobalAveragePool");
  const auto& d = dims_of(*n, n->args().at(0));
  if (d.size() != 4) unsupported(*n, "adaptive average pooling of a tensor of rank " + std::to_string(d.size()) + " (expected 4)");
  if (d[1].batch || d[2].batch || d[3].batch || d[1].value < 0 || d[2].value < 0 || d[3].value < 0)
    unsupported(*n, "adaptive average pooling needs static channels and spatial size (give model.input_shape)");
  const int64_t C = d[1].value, H = d[2].value, W = d[3].value;
  for (int i = 0; i < 2; ++i) {
    if (out[i] == -1) out[i] = i == 0 ? H : W;  // None: keep the input's size
    if (out[i] <= 0) unsupported(*n, "adaptive average pooling to a size of " + std::to_string(out[i]));
  }
  const int64_t oh = out[0], ow = out[1];
  if (H % oh == 0 && W % ow == 0) return pool(n, false, {H / oh, W / ow}, {H / oh, W / ow}, {0, 0}, {}, false, false);
  at::Tensor P = at::zeros({H * W, oh * ow}, at::kFloat);
  auto p = P.accessor<float, 2>();
  for (int64_t i = 0; i < oh; ++i) {
    const int64_t h0 = (i * H) / oh, h1 = ((i + 1) * H + oh - 1) / oh;
    for (int64_t j = 0; j < ow; ++j) {
      const int64_t w0 = (j * W) / ow, w1 = ((j + 1) * W + ow - 1) / ow;
      const float inv = 1.0f / static_cast<float>((h1 - h0) * (w1 - w0));
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) p[h * W + w][i * ow + j] = inv;
    }
  }
  const std::string flat = fresh(n->name() + "_flat"), prod = fresh(n->name() + "_pooled"), y = fresh(n->name());
  node("Reshape", {value(*n, n->args().at(0)), init("shape", at::tensor(std::vector<int64_t>{0, C, H * W}, at::kLong))}, flat,
       n->name() + "_flatten");
  node("MatMul", {flat, init(n->name() + "_pooling", P)}, prod, n->name() + "_matmul");
  last_ = node("Reshape", {prod, init("shape", at::tensor(std::vector<int64_t>{0, C, oh, ow}, at::kLong))}, y, n->name());
  names_[n] = y;
  rank_[n] = 4;
}

}  // namespace qfx::quant::detail
