// ONNX spatial ops: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool,
// Resize, Pad.
#include <limits>

#include "builder.h"
#include "proto.h"

namespace qfx::fx::onnx_detail {
namespace {

struct PoolArgs {
  Node* x;
  std::vector<int64_t> kernel, strides, pads, dilations;
  bool ceil;
};

PoolArgs pool_args(Builder& b, double pad_value) {
  const int64_t d = b.rank(0) - 2;
  if (d != 1 && d != 2) b.fail("input rank " + std::to_string(d + 2) + " (qfx reads 1-D and 2-D pooling)");
  if (b.node().output_size() > 1 && !b.node().output(1).empty()) b.fail("the Indices output is not supported");
  PoolArgs p{b.tensor(0), attr_ints(b.node(), "kernel_shape"), {}, {}, {}, attr_i(b.node(), "ceil_mode", 0) != 0};
  if (p.kernel.size() != static_cast<size_t>(d)) b.fail("kernel_shape must have one value per spatial dim");
  p.strides = b.attr_ints_n("strides", static_cast<size_t>(d), std::vector<int64_t>(d, 1));
  p.dilations = b.attr_ints_n("dilations", static_cast<size_t>(d), std::vector<int64_t>(d, 1));
  p.pads = symmetric_pads(b, &p.x, p.kernel, p.strides, p.dilations, pad_value);
  return p;
}

void max_pool(Builder& b) {
  PoolArgs p = pool_args(b, -std::numeric_limits<double>::infinity());
  const std::string op = p.kernel.size() == 1 ? "aten::max_pool1d" : "aten::max_pool2d";
  b.bind(0, b.call(op, {Argument(p.x), Argument(c10::IValue(p.kernel)), Argument(c10::IValue(p.strides)), Argument(c10::IValue(p.pads)),
                        Argument(c10::IValue(p.dilations)), Argument(c10::IValue(p.ceil))}));
}

void average_pool(Builder& b) {
  const bool include_pad = attr_i(b.node(), "count_include_pad", 0) != 0;
  const std::vector<int64_t> raw = attr_ints(b.node(), "pads");
  PoolArgs p = pool_args(b, 0.0);
  bool padded_before = false;
  for (size_t i = 0; i < raw.size(); ++i) padded_before = padded_before || (raw[i] != 0 && p.pads[i % p.pads.size()] == 0);
  if (padded_before && !include_pad) b.fail("asymmetric pads with count_include_pad = 0");
  for (int64_t dl : p.dilations)
    if (dl != 1) b.fail("dilated average pooling");
  if (p.kernel.size() == 1) {
    b.bind(0, b.call("aten::avg_pool1d", {Argument(p.x), Argument(c10::IValue(p.kernel)), Argument(c10::IValue(p.strides)),
                                          Argument(c10::IValue(p.pads)), Argument(c10::IValue(p.ceil)), Argument(c10::IValue(include_pad))}));
    return;
  }
  b.bind(0, b.call("aten::avg_pool2d", {Argument(p.x), Argument(c10::IValue(p.kernel)), Argument(c10::IValue(p.strides)),
                                        Argument(c10::IValue(p.pads)), Argument(c10::IValue(p.ceil)), Argument(c10::IValue(include_pad)),
                                        Argument()}));
}

void global_average_pool(Builder& b) {
  const int64_t r = b.rank(0);
  if (r == 4 || r == 3) {
    const std::string op = r == 4 ? "aten::adaptive_avg_pool2d" : "aten::adaptive_avg_pool1d";
    b.bind(0, b.call(op, {Argument(b.tensor(0)), Argument(c10::IValue(std::vector<int64_t>(static_cast<size_t>(r - 2), 1)))}));
    return;
  }
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < r; ++d) dims.push_back(d);
  b.bind(0, b.call("aten::mean.dim", {Argument(b.tensor(0)), Argument(c10::IValue(dims)), Argument(c10::IValue(true)), Argument()}));
}

void global_max_pool(Builder& b) {
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < b.rank(0); ++d) dims.push_back(d);
  b.bind(0, b.call("aten::amax", {Argument(b.tensor(0)), Argument(c10::IValue(dims)), Argument(c10::IValue(true))}));
}

// Resize as PyTorch's interpolate: nearest (asymmetric, floor), linear and cubic
// (half_pixel / pytorch_half_pixel, or align_corners; cubic with PyTorch's
// coefficient -0.75 and edge taps) over the spatial dims.
void resize(Builder& b) {
  const std::string mode = attr_s(b.node(), "mode", "nearest");
  const std::string ctm = attr_s(b.node(), "coordinate_transformation_mode", "half_pixel");
  const int64_t r = b.rank(0), d = r - 2;
  const bool linear = mode == "linear" || mode == "cubic";
  if (mode == "cubic" && (attr_f(b.node(), "cubic_coeff_a", -0.75f) != -0.75f || attr_i(b.node(), "exclude_outside", 0) != 0))
    b.fail("cubic Resize with cubic_coeff_a other than -0.75 or exclude_outside 1 (qfx reads PyTorch's bicubic)");
  if (mode == "nearest") {
    const std::string nm = attr_s(b.node(), "nearest_mode", "round_prefer_floor");
    if (ctm != "asymmetric" || nm != "floor")
      b.fail("nearest Resize with coordinate_transformation_mode '" + ctm + "' and nearest_mode '" + nm +
             "' (qfx reads PyTorch's nearest: asymmetric, floor)");
  } else if (!linear || (ctm != "half_pixel" && ctm != "pytorch_half_pixel" && ctm != "align_corners")) {
    b.fail("Resize mode '" + mode + "' with coordinate_transformation_mode '" + ctm +
           "' (qfx reads nearest, linear and cubic as PyTorch's interpolate)");
  }
  if ((linear && d != 2) || d < 1 || d > 2) b.fail("Resize of a rank-" + std::to_string(r) + " tensor");
  Argument sizes, scales;
  if (b.has_input(3)) {
    auto e = shape_elements(b.in(3));
    if (!e || e->size() != static_cast<size_t>(r)) b.fail("sizes must have one value per dim");
    std::vector<int64_t> out = b.shape(0);
    for (auto& v : out) v = std::max<int64_t>(v, 1);  // a dynamic dim counts as 1
    for (size_t d = 2; d < e->size(); ++d)
      out[d] = (*e)[d].kind == Argument::Kind::kConst ? (*e)[d].value.toInt() : 1;
    b.check_size(out, "the output");
    sizes = int_list(std::vector<Argument>(e->begin() + 2, e->end()));
  } else {
    const at::Tensor s = b.constant(2, "scales").to(at::kDouble).contiguous();
    if (s.numel() != r || s[0].item<double>() != 1.0 || s[1].item<double>() != 1.0) b.fail("scales must be 1 on the batch and channel dims");
    std::vector<int64_t> out = b.shape(0);
    for (auto& v : out) v = std::max<int64_t>(v, 1);  // a dynamic dim counts as 1
    for (int64_t d = 2; d < r; ++d) {
      const double v = std::max<int64_t>(out[d], 1) * s[d].item<double>();
      if (!(v >= 0 && v < static_cast<double>(Builder::kMaxElements))) b.invalid("scale " + std::to_string(s[d].item<double>()));
      out[d] = static_cast<int64_t>(v);
    }
    b.check_size(out, "the output");
    scales = Argument(c10::IValue(std::vector<double>(s.data_ptr<double>() + 2, s.data_ptr<double>() + r)));
  }
  Node* x = b.tensor(0);
  if (linear)
    b.bind(0, b.call(mode == "cubic" ? "aten::upsample_bicubic2d.vec" : "aten::upsample_bilinear2d.vec",
                     {Argument(x), sizes, Argument(c10::IValue(ctm == "align_corners")), scales}));
  else
    b.bind(0, b.call(d == 2 ? "aten::upsample_nearest2d.vec" : "aten::upsample_nearest1d.vec", {Argument(x), sizes, scales}));
}

void pad(Builder& b) {
  const std::string mode = attr_s(b.node(), "mode", "constant");
  if (mode != "constant") b.fail("Pad mode '" + mode + "' (qfx reads constant padding)");
  const at::Tensor p = b.constant(1, "pads").to(at::kLong).contiguous();
  const int64_t r = b.rank(0);
  std::vector<int64_t> axes;
  if (b.has_input(3)) {
    const at::Tensor a = b.constant(3, "axes").to(at::kLong).contiguous();
    for (int64_t i = 0; i < a.numel(); ++i) axes.push_back(b.axis(a.data_ptr<int64_t>()[i], r, "axis"));
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  const auto n = static_cast<int64_t>(axes.size());
  if (p.numel() != 2 * n) b.fail("pads must hold two values per padded axis");
  std::vector<int64_t> begin(r, 0), end(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    begin[axes[i]] = p.data_ptr<int64_t>()[i];
    end[axes[i]] = p.data_ptr<int64_t>()[i + n];
  }
  std::vector<int64_t> padded = b.shape(0);
  for (int64_t d = 0; d < r; ++d) padded[d] = std::max<int64_t>(padded[d], 1) + std::max<int64_t>(begin[d], 0) + std::max<int64_t>(end[d], 0);
  b.check_size(padded, "the output");
  int64_t last = 0;  // torch pads from the last dim; drop the unpadded leading dims
  for (int64_t d = 0; d < r; ++d)
    if (begin[d] || end[d]) last = r - d;
  std::vector<int64_t> torch_pad;
  for (int64_t k = 0; k < last; ++k) {
    torch_pad.push_back(begin[r - 1 - k]);
    torch_pad.push_back(end[r - 1 - k]);
  }
  const double value = b.has_input(2) ? b.constant(2, "constant_value").item<double>() : 0.0;
  b.bind(0, b.call("aten::constant_pad_nd", {Argument(b.tensor(0)), Argument(c10::IValue(torch_pad)), Argument(c10::IValue(value))}));
}

}  // namespace

void add_spatial_ops(ConverterTable& t) {
  t["MaxPool"] = max_pool;
  t["AveragePool"] = average_pool;
  t["GlobalAveragePool"] = global_average_pool;
  t["GlobalMaxPool"] = global_max_pool;
  t["Resize"] = resize;
  t["Pad"] = pad;
}

}  // namespace qfx::fx::onnx_detail
