// Reference kernels: shape ops, which move bytes of any dtype (Flatten, Reshape,
// Squeeze, Unsqueeze, Transpose, Identity, Concat and QLinearConcat, Slice, Expand),
// and Resize. Pad is pad.cpp.
#include <array>
#include <cmath>
#include <limits>

#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

// --- shape ops (any dtype: they move bytes) ---------------------------------------------------

Kernel copy_as(const Shape& out, DType dt) {
  Kernel k;
  k.outputs = {{out, dt}};
  k.run = [](const In& i, const Out& o) {
    if (i[0]->raw() != o[0]->raw()) std::memcpy(o[0]->raw(), i[0]->raw(), i[0]->nbytes());
  };
  return k;
}

Kernel reshape(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape& x = in[0].shape;
  Shape out;
  if (n.op == "Flatten") {
    const int64_t axis = norm_axis(n, n.attr_i("axis", 1), x.size() + 1);
    int64_t a = 1, b = 1;
    for (size_t i = 0; i < x.size(); ++i) (static_cast<int64_t>(i) < axis ? a : b) *= x[i];
    out = {a, b};
  } else if (n.op == "Reshape") {
    auto s = int_values(need_const(n, consts, 1, "Reshape shape"));
    const bool allowzero = n.attr_i("allowzero", 0) != 0;
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == 0 && !allowzero) {
        if (i >= x.size()) bad_shape(n, "0 in the shape copies a missing input dim");
        s[i] = x[i];
      }
      if (s[i] == -1) {
        if (infer >= 0) bad_shape(n, "more than one -1 in the shape");
        infer = static_cast<int64_t>(i);
      } else {
        // Dims are >= 0 and their product stays below 2^48 (a fuzzed shape's
        // product overflowed int64).
        if (s[i] < 0) bad_shape(n, "negative dim " + std::to_string(s[i]) + " in the shape");
        if (s[i] != 0 && known > (int64_t{1} << 48) / s[i]) bad_shape(n, "the shape's element count is too large");
        known *= s[i];
      }
    }
    const int64_t total = numel(x);
    if (infer >= 0) {
      if (known == 0 || total % known != 0) bad_shape(n, "cannot infer the -1 dim from " + std::to_string(total) + " elements");
      s[static_cast<size_t>(infer)] = total / known;
    } else if (known != total) {
      bad_shape(n, "the shape holds " + std::to_string(known) + " elements, the input " + std::to_string(total));
    }
    out = s;
  } else if (n.op == "Squeeze") {
    std::vector<int64_t> axes;
    if (n.inputs.size() > 1 && !n.inputs[1].empty()) axes = int_values(need_const(n, consts, 1, "Squeeze axes"));
    std::vector<bool> drop(x.size(), false);
    for (auto a : axes) drop[static_cast<size_t>(norm_axis(n, a, x.size()))] = true;
    for (size_t i = 0; i < x.size(); ++i) {
      if (axes.empty() && x[i] == 1) continue;
      if (drop[i]) {
        if (x[i] != 1) bad_shape(n, "cannot squeeze dim " + std::to_string(i) + " of size " + std::to_string(x[i]));
        continue;
      }
      out.push_back(x[i]);
    }
  } else {  // Unsqueeze
    auto axes = int_values(need_const(n, consts, 1, "Unsqueeze axes"));
    const size_t r = x.size() + axes.size();
    std::vector<bool> ins(r, false);
    for (auto a : axes) {
      const size_t k = static_cast<size_t>(norm_axis(n, a, r));
      if (ins[k]) bad_shape(n, "axes name " + std::to_string(k) + " twice");  // would read past the input's dims
      ins[k] = true;
    }
    size_t j = 0;
    for (size_t i = 0; i < r; ++i) out.push_back(ins[i] ? 1 : x[j++]);
  }
  if (numel(out) != numel(x)) bad_shape(n, "cannot reshape " + shape_str(x) + " to " + shape_str(out));
  return copy_as(out, in[0].dtype);
}

Kernel transpose(const Node& n, const std::vector<Meta>& in) {
  const Shape& x = in[0].shape;
  auto perm = n.attr_ints("perm");
  if (perm.empty())
    for (size_t i = 0; i < x.size(); ++i) perm.push_back(static_cast<int64_t>(x.size() - 1 - i));
  if (perm.size() != x.size()) bad_shape(n, "perm has the wrong length");
  std::vector<bool> seen(x.size(), false);
  for (auto& p : perm) {  // negative entries count from the end; each axis exactly once
    p = norm_axis(n, p, x.size());
    if (seen[static_cast<size_t>(p)]) bad_shape(n, "perm names axis " + std::to_string(p) + " twice");
    seen[static_cast<size_t>(p)] = true;
  }
  Shape out;
  for (auto p : perm) out.push_back(x[static_cast<size_t>(p)]);
  Kernel k;
  const DType dt = in[0].dtype;
  k.outputs = {{out, dt}};
  // Strides of the input read in output order.
  Index in_str{}, st{};
  int64_t acc = 1;
  for (size_t i = x.size(); i-- > 0;) {
    in_str[i] = acc;
    acc *= x[i];
  }
  for (size_t i = 0; i < perm.size(); ++i) st[i] = in_str[static_cast<size_t>(perm[i])];
  const size_t es = dtype_size(dt);
  k.run = [out, st, es](const In& i, const Out& o) {
    const uint8_t* src = static_cast<const uint8_t*>(i[0]->raw());
    uint8_t* dst = static_cast<uint8_t*>(o[0]->raw());
    const int64_t total = numel(out);
    Index idx{};
    int64_t off = 0;
    for (int64_t p = 0; p < total; ++p) {
      std::memcpy(dst + p * static_cast<int64_t>(es), src + off * static_cast<int64_t>(es), es);
      for (size_t d = out.size(); d-- > 0;) {
        ++idx[d];
        off += st[d];
        if (idx[d] < out[d]) break;
        off -= st[d] * out[d];
        idx[d] = 0;
      }
    }
  };
  return k;
}

Kernel concat(const Node& n, const std::vector<Meta>& in) {
  const int64_t axis = norm_axis(n, n.attr_i("axis", 0), in[0].shape.size());
  Shape out = in[0].shape;
  out[static_cast<size_t>(axis)] = 0;
  for (const auto& m : in) {
    if (m.shape.size() != out.size()) bad_shape(n, "inputs of different rank");
    for (size_t d = 0; d < out.size(); ++d)
      if (static_cast<int64_t>(d) != axis && m.shape[d] != out[d]) bad_shape(n, "inputs differ outside the concat axis");
    out[static_cast<size_t>(axis)] += m.shape[static_cast<size_t>(axis)];
  }
  const bool q = n.op == "QLinearConcat";
  const DType dt = q ? n.out_q.dtype : in[0].dtype;
  Kernel k;
  k.outputs = {{out, dt}};
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out[static_cast<size_t>(d)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < out.size(); ++d) inner *= out[d];
  std::vector<int64_t> widths;
  for (const auto& m : in) widths.push_back(m.shape[static_cast<size_t>(axis)] * inner);
  const int64_t total_w = out[static_cast<size_t>(axis)] * inner;
  const size_t es = dtype_size(dt);
  std::vector<ir::QInfo> iq = n.in_q;
  ir::QInfo oq = n.out_q;
  const bool onnx = !q || n.arithmetic.elementwise == RequantMode::kFloat;
  std::vector<Requantizer> rq;
  for (size_t t = 0; !onnx && t < iq.size(); ++t)
    rq.push_back(Requantizer::rescale(n.arithmetic, {iq[t].scale[0] / oq.scale[0]}, n.label()));
  k.run = [=](const In& i, const Out& o) {
    uint8_t* dst = static_cast<uint8_t*>(o[0]->raw());
    int64_t col = 0;
    for (size_t t = 0; t < i.size(); ++t) {
      const uint8_t* src = static_cast<const uint8_t*>(i[t]->raw());
      const int64_t w = widths[t];
      const bool same = !q || (iq[t].scale[0] == oq.scale[0] && iq[t].zero_point[0] == oq.zero_point[0] && iq[t].dtype == oq.dtype);
      for (int64_t r = 0; r < outer; ++r) {
        if (same) {
          std::memcpy(dst + (r * total_w + col) * static_cast<int64_t>(es), src + r * w * static_cast<int64_t>(es),
                      static_cast<size_t>(w) * es);
        } else {  // requantize this input to the output's qparams
          const QRange rr = qrange(oq.dtype);
          for (int64_t j = 0; j < w; ++j) {
            const int32_t d = qload(*i[t], r * w + j) - iq[t].zero_point[0];
            const int32_t v = onnx ? quantize_value(iq[t].scale[0] * static_cast<float>(d), oq.scale[0], oq.zero_point[0], rr.lo, rr.hi)
                                   : rq[t].code(d, 0, oq.zero_point[0], rr.lo, rr.hi);
            store_code(oq.dtype, dst, r * total_w + col + j, v);
          }
        }
      }
      col += w;
    }
  };
  return k;
}

Kernel slice(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape& x = in[0].shape;
  auto starts = int_values(need_const(n, consts, 1, "Slice starts"));
  auto ends = int_values(need_const(n, consts, 2, "Slice ends"));
  std::vector<int64_t> axes, steps;
  if (n.inputs.size() > 3 && !n.inputs[3].empty()) axes = int_values(need_const(n, consts, 3, "Slice axes"));
  if (n.inputs.size() > 4 && !n.inputs[4].empty()) steps = int_values(need_const(n, consts, 4, "Slice steps"));
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  // One start, end, axis and step per sliced axis (the ONNX fuzzer found ends shorter
  // than starts read past them).
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    bad_shape(n, std::to_string(starts.size()) + " starts, " + std::to_string(ends.size()) + " ends, " +
                     std::to_string(axes.size()) + " axes and " + std::to_string(steps.size()) + " steps: the counts must match");
  std::vector<int64_t> st(x.size(), 0), step(x.size(), 1);
  Shape out = x;
  for (size_t j = 0; j < axes.size(); ++j) {
    const size_t a = static_cast<size_t>(norm_axis(n, axes[j], x.size()));
    const int64_t d = x[a], s = steps[j];
    if (s == 0 || s == std::numeric_limits<int64_t>::min()) bad_shape(n, "step " + std::to_string(s));
    auto clampi = [](int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); };
    int64_t b = starts[j] < 0 ? starts[j] + d : starts[j];
    int64_t e = ends[j] < 0 ? ends[j] + d : ends[j];
    if (s > 0) {
      b = clampi(b, 0, d);
      e = clampi(e, 0, d);
      out[a] = e > b ? 1 + (e - b - 1) / s : 0;  // ceil((e - b) / s) without overflow for huge steps
    } else {
      b = clampi(b, 0, d - 1);
      e = clampi(e, -1, d - 1);
      out[a] = b > e ? 1 + (b - e - 1) / -s : 0;
    }
    st[a] = b;
    step[a] = s;
  }
  Kernel k;
  const DType dt = in[0].dtype;
  k.outputs = {{out, dt}};
  const size_t es = dtype_size(dt);
  k.run = [=](const In& i, const Out& o) {
    const uint8_t* src = static_cast<const uint8_t*>(i[0]->raw());
    uint8_t* dst = static_cast<uint8_t*>(o[0]->raw());
    Index in_str{};
    int64_t acc = 1;
    for (size_t d = x.size(); d-- > 0;) {
      in_str[d] = acc;
      acc *= x[d];
    }
    const int64_t total = numel(out);
    Index idx{};
    for (int64_t p = 0; p < total; ++p) {
      int64_t off = 0;
      for (size_t d = 0; d < out.size(); ++d) off += (st[d] + idx[d] * step[d]) * in_str[d];
      std::memcpy(dst + p * static_cast<int64_t>(es), src + off * static_cast<int64_t>(es), es);
      for (size_t d = out.size(); d-- > 0;) {
        if (++idx[d] < out[d]) break;
        idx[d] = 0;
      }
    }
  };
  return k;
}

// Keys' cubic convolution weights of the four taps at offsets -1, 0, 1, 2 from
// floor(f), for t = f - floor(f) and coefficient `a` (-0.75: PyTorch's bicubic).
std::array<float, 4> cubic_weights(float t, float a) {
  auto near = [a](float d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };   // |d| <= 1
  auto far = [a](float d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < |d| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

// Bicubic sample of one [H, W] plane at source coordinates (fy, fx), the taps outside
// the plane replaced by its edge (ONNX's cubic Resize with exclude_outside=0, and
// PyTorch's upsample_bicubic2d).
float cubic_sample(const float* plane, int64_t H, int64_t W, float fy, float fx, float a) {
  const float y0 = std::floor(fy), x0 = std::floor(fx);
  const std::array<float, 4> wy = cubic_weights(fy - y0, a), wx = cubic_weights(fx - x0, a);
  float v = 0;
  for (int i = 0; i < 4; ++i) {
    const int64_t yy = std::min(std::max<int64_t>(static_cast<int64_t>(y0) - 1 + i, 0), H - 1);
    float row = 0;
    for (int j = 0; j < 4; ++j) {
      const int64_t xx = std::min(std::max<int64_t>(static_cast<int64_t>(x0) - 1 + j, 0), W - 1);
      row += wx[static_cast<size_t>(j)] * plane[yy * W + xx];
    }
    v += wy[static_cast<size_t>(i)] * row;
  }
  return v;
}

Kernel resize(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape& x = in[0].shape;
  if (x.size() != 4) unsupported(n, "only 4-D [N, C, H, W] Resize is supported");
  const std::string mode = n.attr_s("mode", "nearest");
  const std::string ctm = n.attr_s("coordinate_transformation_mode", "half_pixel");
  const std::string nm = n.attr_s("nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") unsupported(n, "mode '" + mode + "' (nearest, linear or cubic)");
  const float a = n.attr_f("cubic_coeff_a", -0.75f);
  if (mode == "cubic" && n.attr_i("exclude_outside", 0) != 0) unsupported(n, "exclude_outside=1 (only 0 is supported)");
  // Opset 18's attributes, at their defaults only.
  if (n.attr_i("antialias", 0) != 0) unsupported(n, "antialias=1 (opset 18; only 0 is supported)");
  if (n.has("axes")) unsupported(n, "the axes attribute (opset 18; scales / sizes for every dim only)");
  if (const std::string k = n.attr_s("keep_aspect_ratio_policy", "stretch"); k != "stretch")
    unsupported(n, "keep_aspect_ratio_policy '" + k + "' (opset 18; only stretch is supported)");
  Shape out = x;
  std::vector<float> scale = {1, 1, 1, 1};
  if (n.inputs.size() > 3 && !n.inputs[3].empty()) {
    auto s = int_values(need_const(n, consts, 3, "Resize sizes"));
    if (s.size() != 4) bad_shape(n, "sizes must have 4 values");
    out.assign(s.begin(), s.end());
    for (size_t d = 0; d < 4; ++d) {
      if (out[d] <= 0 || out[d] > (int64_t{1} << 31)) bad_shape(n, "sizes must be in 1..2^31");
      scale[d] = static_cast<float>(out[d]) / static_cast<float>(x[d]);
    }
  } else {
    const Tensor& sc = need_const(n, consts, 2, "Resize scales", DType::kFloat32, 4);
    for (size_t d = 0; d < 4; ++d) {
      scale[d] = sc.data<float>()[d];
      // The output size must be a representable, allocatable count (a fuzzed
      // scale of 1e20 made the float -> int64 conversion undefined).
      const double len = std::floor(static_cast<double>(x[d]) * static_cast<double>(scale[d]));
      if (!(scale[d] > 0) || !(len >= 1 && len <= static_cast<double>(int64_t{1} << 31)))
        bad_shape(n, "scales must be positive and give output sizes in 1..2^31");
      out[d] = static_cast<int64_t>(len);
    }
  }
  if (out[0] != x[0] || out[1] != x[1]) unsupported(n, "resizing N or C");
  auto src_coord = [=](int64_t o, int64_t in_len, int64_t out_len, float s) -> float {
    if (ctm == "asymmetric") return static_cast<float>(o) / s;
    if (ctm == "align_corners") return out_len == 1 ? 0.0f : static_cast<float>(o) * static_cast<float>(in_len - 1) / static_cast<float>(out_len - 1);
    if (ctm == "pytorch_half_pixel") return out_len > 1 ? (static_cast<float>(o) + 0.5f) / s - 0.5f : 0.0f;
    return (static_cast<float>(o) + 0.5f) / s - 0.5f;  // half_pixel
  };
  if (ctm != "asymmetric" && ctm != "align_corners" && ctm != "pytorch_half_pixel" && ctm != "half_pixel")
    unsupported(n, "coordinate_transformation_mode '" + ctm + "'");
  Kernel k;
  k.outputs = {{out, DType::kFloat32}};
  k.run = [=](const In& i, const Out& o) {
    const float* xp = i[0]->data<float>();
    float* y = o[0]->data<float>();
    const int64_t H = x[2], W = x[3], oH = out[2], oW = out[3];
    for (int64_t p = 0; p < x[0] * x[1]; ++p)
      for (int64_t oh = 0; oh < oH; ++oh) {
        const float fy = src_coord(oh, H, oH, scale[2]);
        for (int64_t ow = 0; ow < oW; ++ow) {
          const float fx = src_coord(ow, W, oW, scale[3]);
          float v;
          if (mode == "nearest") {
            auto pick = [&](float f, int64_t len) {
              int64_t r;
              if (nm == "floor") r = static_cast<int64_t>(std::floor(f));
              else if (nm == "ceil") r = static_cast<int64_t>(std::ceil(f));
              else if (nm == "round_prefer_ceil") r = static_cast<int64_t>(std::floor(f + 0.5f));
              else r = static_cast<int64_t>(std::ceil(f - 0.5f));  // round_prefer_floor
              return std::min(std::max<int64_t>(r, 0), len - 1);
            };
            v = xp[(p * H + pick(fy, H)) * W + pick(fx, W)];
          } else if (mode == "cubic") {
            v = cubic_sample(xp + p * H * W, H, W, fy, fx, a);
          } else {
            const float cy = std::min(std::max(fy, 0.0f), static_cast<float>(H - 1));
            const float cx = std::min(std::max(fx, 0.0f), static_cast<float>(W - 1));
            const int64_t y0 = static_cast<int64_t>(cy), x0 = static_cast<int64_t>(cx);
            const int64_t y1 = std::min(y0 + 1, H - 1), x1 = std::min(x0 + 1, W - 1);
            const float dy = cy - static_cast<float>(y0), dx = cx - static_cast<float>(x0);
            const float* r0 = xp + (p * H + y0) * W;
            const float* r1 = xp + (p * H + y1) * W;
            v = (r0[x0] * (1 - dx) + r0[x1] * dx) * (1 - dy) + (r1[x0] * (1 - dx) + r1[x1] * dx) * dy;
          }
          y[(p * oH + oh) * oW + ow] = v;
        }
      }
  };
  return k;
}


// Expand (opset 13): numpy broadcast of the input to the constant shape, any dtype.
Kernel expand(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  if (in.size() < 2) bad_shape(n, "needs an input and a shape");
  const Tensor& s = need_const(n, consts, 1, "Expand shape", DType::kInt64);
  if (s.shape().size() != 1) bad_shape(n, "the shape must be 1-D");
  const Shape target(s.data<int64_t>(), s.data<int64_t>() + s.numel());
  for (int64_t d : target)
    if (d < 0) bad_shape(n, "negative entry in the shape " + shape_str(target));
  const Shape out = broadcast(n, in[0].shape, target);
  if (out.size() > Index{}.size()) unsupported(n, "rank above " + std::to_string(Index{}.size()));
  Kernel k;
  k.outputs = {{out, in[0].dtype}};
  const Shape xs = in[0].shape;
  const size_t es = dtype_size(in[0].dtype);
  k.run = [out, xs, es](const In& i, const Out& o) {
    const auto* x = static_cast<const uint8_t*>(i[0]->raw());
    auto* y = static_cast<uint8_t*>(o[0]->raw());
    for_each_broadcast(out, xs, out, [&](int64_t p, int64_t q, int64_t) {
      std::memcpy(y + static_cast<size_t>(p) * es, x + static_cast<size_t>(q) * es, es);
    });
  };
  return k;
}

}  // namespace

void register_reference_shape() {
  add_reference({"Flatten", "Reshape", "Squeeze", "Unsqueeze"}, reshape);
  add_reference({"Transpose"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return transpose(n, in); });
  add_reference({"Identity"}, [](const Node&, const std::vector<Meta>& in, const std::vector<const Tensor*>&) {
    return copy_as(in[0].shape, in[0].dtype);
  });
  add_reference({"Concat", "QLinearConcat"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return concat(n, in); });
  add_reference({"Slice"}, slice);
  add_reference({"Expand"}, expand);
  add_reference({"Resize"}, resize);
}

}  // namespace qfx::runtime
