// Reference kernels: window geometry and the registration wrapper.
#include "common.h"

namespace qfx::runtime::ref {

Geom window_geom(const Node& n, const Shape& x, std::vector<int64_t> kernel, bool ceil_mode) {
  if (x.size() != 3 && x.size() != 4)
    unsupported(n, "only 1-D and 2-D spatial inputs ([N, C, W] or [N, C, H, W]) are supported, got " + shape_str(x));
  const bool one_d = x.size() == 3;
  Geom g{};
  g.N = x[0];
  g.C = x[1];
  g.H = one_d ? 1 : x[2];
  g.W = x.back();
  if (kernel.size() != (one_d ? 1u : 2u)) bad_shape(n, "kernel rank does not match the input");
  if (one_d) kernel.insert(kernel.begin(), 1);
  g.kH = kernel[0];
  g.kW = kernel[1];
  auto pick = [&](const char* a, int64_t def) {
    auto v = n.attr_ints(a);
    if (v.empty()) v.assign(one_d ? 1 : 2, def);
    if (one_d) v.insert(v.begin(), def);
    return v;
  };
  auto s = pick("strides", 1), d = pick("dilations", 1);
  // Attribute lengths and signs first: everything below indexes and divides by them
  // (a fuzzed MaxPool with one stride for two spatial dims read past the vector).
  if (s.size() != 2 || d.size() != 2) bad_shape(n, "strides and dilations need one value per spatial dim");
  if (s[0] <= 0 || s[1] <= 0 || d[0] <= 0 || d[1] <= 0 || g.kH <= 0 || g.kW <= 0)
    bad_shape(n, "kernel_shape, strides and dilations must be positive");
  g.sH = s[0]; g.sW = s[1]; g.dH = d[0]; g.dW = d[1];
  auto pads = n.attr_ints("pads");
  if (pads.empty()) pads.assign(one_d ? 2 : 4, 0);
  if (pads.size() != (one_d ? 2u : 4u)) bad_shape(n, "pads need two values per spatial dim");
  if (*std::min_element(pads.begin(), pads.end()) < 0) bad_shape(n, "pads must be non-negative");
  // Bounded, so the window arithmetic below cannot overflow int64.
  constexpr int64_t kBig = int64_t{1} << 31;
  if (s[0] > kBig || s[1] > kBig || d[0] > kBig || d[1] > kBig || g.kH > kBig || g.kW > kBig ||
      *std::max_element(pads.begin(), pads.end()) > kBig)
    bad_shape(n, "kernel_shape, strides, dilations and pads must be below 2^31");
  if (one_d) pads = {0, pads[0], 0, pads[1]};
  g.pT = pads[0]; g.pL = pads[1]; g.pB = pads[2]; g.pR = pads[3];
  const std::string ap = n.attr_s("auto_pad", "NOTSET");
  auto out = [&](int64_t in, int64_t k, int64_t st, int64_t dil, int64_t p0, int64_t p1) {
    const int64_t ek = dil * (k - 1) + 1;
    const int64_t num = in + p0 + p1 - ek;
    return (ceil_mode ? (num + st - 1) / st : num / st) + 1;
  };
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    auto same = [&](int64_t in, int64_t k, int64_t st, int64_t dil, int64_t* p0, int64_t* p1) {
      const int64_t o = (in + st - 1) / st;
      const int64_t total = std::max<int64_t>(0, (o - 1) * st + dil * (k - 1) + 1 - in);
      *p0 = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      *p1 = total - *p0;
    };
    if (!one_d) same(g.H, g.kH, g.sH, g.dH, &g.pT, &g.pB);
    same(g.W, g.kW, g.sW, g.dW, &g.pL, &g.pR);
  } else if (ap == "VALID") {
    g.pT = g.pL = g.pB = g.pR = 0;
  } else if (ap != "NOTSET") {
    unsupported(n, "auto_pad " + ap);
  }
  g.oH = out(g.H, g.kH, g.sH, g.dH, g.pT, g.pB);
  g.oW = out(g.W, g.kW, g.sW, g.dW, g.pL, g.pR);
  if (g.oH <= 0 || g.oW <= 0) bad_shape(n, "the window does not fit the input " + shape_str(x));
  return g;
}

Reduction reduction(const Node& n, const Shape& x, const std::vector<const Tensor*>& consts) {
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (has_input(n, 1)) axes = int_values(need_known(n, consts, 1, "the reduction axes"));
  Reduction r;
  r.noop = axes.empty() && n.attr_i("noop_with_empty_axes", 0) != 0;
  std::vector<bool> red(x.size(), axes.empty() && !r.noop);
  for (auto a : axes) red[static_cast<size_t>(norm_axis(n, a, x.size()))] = true;
  const bool keep = n.attr_i("keepdims", 1) != 0;
  for (size_t d = 0; d < x.size(); ++d) {
    if (!red[d] || keep) r.out.push_back(red[d] ? 1 : x[d]);
    r.kept.push_back(red[d] ? 1 : x[d]);
  }
  return r;
}

void add_reference(const std::vector<std::string>& ops, RefBuilder build, bool elementwise) {
  for (const auto& op : ops)
    add_kernel("reference", op, "reference", [build, elementwise](const KernelRequest& r, Kernel* k) {
      for (const auto& m : r.in)
        if (m.shape.size() > kMaxRank) unsupported(r.node, "tensors of rank above " + std::to_string(kMaxRank));
      if (r.in.empty()) bad_shape(r.node, "missing input");
      *k = build(r.node, r.in, r.consts);
      // An elementwise op on inputs of one shape, all channels last, with a
      // channels-last output allowed: the flat loop is the same in either layout.
      bool same = elementwise && r.nhwc_out && k->outputs.size() == 1 && k->outputs[0].shape == r.in[0].shape;
      for (const auto& m : r.in) same = same && m.nhwc && m.shape == r.in[0].shape;
      if (same) {
        k->accepts_nhwc = true;
        k->outputs[0].nhwc = true;
      }
      return true;
    });
}

Geom conv_geom(const Node& n, const std::vector<Meta>& in, const Shape& w) {
  const Shape& x = in[0].shape;
  if (w.size() != x.size()) bad_shape(n, "weight rank " + std::to_string(w.size()) + " does not match input " + shape_str(x));
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (n.has("kernel_shape") && n.attr_ints("kernel_shape") != kernel) bad_shape(n, "kernel_shape does not match the weight");
  Geom g = window_geom(n, x, kernel);
  g.group = n.attr_i("group", 1);
  g.M = w[0];
  if (g.group <= 0 || g.C % g.group != 0 || g.M % g.group != 0 || w[1] * g.group != g.C)
    bad_shape(n, "weight " + shape_str(w) + " and group " + std::to_string(g.group) + " do not match input channels " +
                     std::to_string(g.C));
  return g;
}

void channel_layout(const Node& n, const ir::QInfo& q, const Shape& x, int64_t* channels, int64_t* inner) {
  const int64_t axis = q.per_channel() ? norm_axis(n, q.axis, x.size()) : 0;
  *inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) *inner *= x[d];
  *channels = q.per_channel() ? x[static_cast<size_t>(axis)] : 1;
  if (q.per_channel() && static_cast<int64_t>(q.scale.size()) != *channels)
    bad_shape(n, std::to_string(q.scale.size()) + " scales for " + std::to_string(*channels) + " channels");
}

}  // namespace qfx::runtime::ref
