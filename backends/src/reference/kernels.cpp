// Reference kernels: plain C++ loops that define the runtime's float and integer
// arithmetic. Every other backend is tested against them.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "../kernels.h"
#include "qfx/error.h"

namespace qfx::runtime {
namespace {

using ir::Node;
using In = std::vector<const Tensor*>;
using Out = std::vector<Tensor*>;

[[noreturn]] void unsupported(const Node& n, const std::string& why) {
  throw UnsupportedOpError(n.label() + ": " + why);
}

std::string shape_str(const Shape& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

[[noreturn]] void bad_shape(const Node& n, const std::string& why) {
  throw DataError(n.label() + ": " + why);
}

int64_t numel(const Shape& s) {
  int64_t p = 1;
  for (auto d : s) p *= d;
  return p;
}

int64_t norm_axis(const Node& n, int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) bad_shape(n, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
  return axis < 0 ? axis + r : axis;
}

const Tensor& need_const(const Node& n, const std::vector<const Tensor*>& consts, size_t i, const char* what) {
  if (i >= consts.size() || !consts[i])
    unsupported(n, std::string(what) + " must be a constant (initializer); computed " + what + " is not supported");
  return *consts[i];
}

std::vector<int64_t> int_values(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.dtype() == DType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
  return v;
}

float float_value(const Tensor& t) { return t.data<float>()[0]; }

// Index arithmetic uses fixed-size arrays, so running a kernel allocates nothing.
constexpr size_t kMaxRank = 8;
using Index = std::array<int64_t, kMaxRank>;

// --- broadcasting elementwise -------------------------------------------------

Shape broadcast(const Node& n, const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape o(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i + a.size() >= r ? a[i + a.size() - r] : 1;
    const int64_t db = i + b.size() >= r ? b[i + b.size() - r] : 1;
    if (da != db && da != 1 && db != 1)
      bad_shape(n, "cannot broadcast " + shape_str(a) + " with " + shape_str(b));
    o[i] = da == 1 ? db : da;
  }
  return o;
}

// Element strides of `s` seen as shape `o` (0 along broadcast dims).
Index bstrides(const Shape& s, const Shape& o) {
  Index st{};
  int64_t acc = 1;
  for (size_t k = 0; k < s.size(); ++k) {
    const size_t i = s.size() - 1 - k, j = o.size() - 1 - k;
    st[j] = s[i] == 1 ? 0 : acc;
    acc *= s[i];
  }
  return st;
}

template <typename F>
void for_each_broadcast(const Shape& o, const Shape& a, const Shape& b, F&& f) {
  const int64_t total = numel(o);
  if (a == o && b == o) {
    for (int64_t i = 0; i < total; ++i) f(i, i, i);
    return;
  }
  if (a == o && numel(b) == 1) {
    for (int64_t i = 0; i < total; ++i) f(i, i, 0);
    return;
  }
  const Index sa = bstrides(a, o), sb = bstrides(b, o);
  const size_t r = o.size();
  Index idx{};
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < total; ++i) {
    f(i, ia, ib);
    for (size_t d = r; d-- > 0;) {
      ++idx[d];
      ia += sa[d];
      ib += sb[d];
      if (idx[d] < o[d]) break;
      ia -= sa[d] * o[d];
      ib -= sb[d] * o[d];
      idx[d] = 0;
    }
  }
}

Kernel binary(const Node& n, const std::vector<Meta>& in) {
  Kernel k;
  const Shape o = broadcast(n, in[0].shape, in[1].shape);
  k.outputs = {{o, DType::kFloat32}};
  if (in[0].dtype != DType::kFloat32 || in[1].dtype != DType::kFloat32) unsupported(n, "only float32 inputs are supported");
  const Shape a = in[0].shape, b = in[1].shape;
  const std::string op = n.op;
  const float lo = n.fused_act == "Relu" ? 0.0f : n.fused_act == "Clip" ? n.clip_lo : -INFINITY;
  const float hi = n.fused_act == "Clip" ? n.clip_hi : INFINITY;
  k.run = [o, a, b, op, lo, hi](const In& i, const Out& out) {
    const float* x = i[0]->data<float>();
    const float* y = i[1]->data<float>();
    float* z = out[0]->data<float>();
    if (op == "Add")
      for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = std::min(std::max(x[q] + y[r], lo), hi); });
    else if (op == "Sub") for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = x[q] - y[r]; });
    else if (op == "Mul") for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = x[q] * y[r]; });
    else for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = x[q] / y[r]; });
  };
  return k;
}

Kernel unary(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  if (in[0].dtype != DType::kFloat32) unsupported(n, "only float32 input is supported");
  Kernel k;
  k.outputs = {{in[0].shape, DType::kFloat32}};
  const std::string op = n.op;
  std::function<float(float)> f;
  if (op == "Relu") f = [](float x) { return x > 0 ? x : 0.0f; };
  else if (op == "Sigmoid") f = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  else if (op == "Tanh") f = [](float x) { return std::tanh(x); };
  else if (op == "Erf") f = [](float x) { return std::erf(x); };
  else if (op == "Sqrt") f = [](float x) { return std::sqrt(x); };
  else if (op == "Exp") f = [](float x) { return std::exp(x); };
  else if (op == "Neg") f = [](float x) { return -x; };
  else if (op == "HardSwish") f = [](float x) { return x * std::min(std::max(x / 6.0f + 0.5f, 0.0f), 1.0f); };
  else if (op == "LeakyRelu") {
    const float a = n.attr_f("alpha", 0.01f);
    f = [a](float x) { return x >= 0 ? x : a * x; };
  } else if (op == "HardSigmoid") {
    const float a = n.attr_f("alpha", 0.2f), b = n.attr_f("beta", 0.5f);
    f = [a, b](float x) { return std::min(std::max(a * x + b, 0.0f), 1.0f); };
  } else if (op == "Gelu") {
    if (n.attr_s("approximate", "none") == "tanh")
      f = [](float x) { return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x))); };
    else
      f = [](float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678f)); };
  } else if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (consts.size() > 1 && !n.inputs[1].empty()) lo = float_value(need_const(n, consts, 1, "Clip min"));
    if (consts.size() > 2 && !n.inputs[2].empty()) hi = float_value(need_const(n, consts, 2, "Clip max"));
    f = [lo, hi](float x) { return std::min(std::max(x, lo), hi); };
  } else {
    unsupported(n, "unknown unary op");
  }
  k.run = [f](const In& i, const Out& o) {
    const float* x = i[0]->data<float>();
    float* y = o[0]->data<float>();
    const int64_t t = i[0]->numel();
    for (int64_t p = 0; p < t; ++p) y[p] = f(x[p]);
  };
  return k;
}

// --- conv / pool geometry --------------------------------------------------------

struct Geom {
  int64_t N, C, H, W, M, kH, kW, oH, oW, sH, sW, dH, dW, pT, pL, pB, pR, group;
};

// Spatial geometry of a 1-D or 2-D window op on input [N, C, (H,) W].
Geom window_geom(const Node& n, const Shape& x, std::vector<int64_t> kernel, bool ceil_mode = false) {
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
  g.sH = s[0]; g.sW = s[1]; g.dH = d[0]; g.dW = d[1];
  auto pads = n.attr_ints("pads");
  if (pads.empty()) pads.assign(one_d ? 2 : 4, 0);
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

Shape spatial_out(const Shape& x, int64_t C, const Geom& g) {
  if (x.size() == 3) return {g.N, C, g.oW};
  return {g.N, C, g.oH, g.oW};
}

// Output columns [lo, hi) whose input column ow*s + kw*d - p lies inside [0, W).
inline void valid_range(int64_t k, int64_t s, int64_t d, int64_t p, int64_t in, int64_t out, int64_t* lo, int64_t* hi) {
  const int64_t off = k * d - p;  // input = o * s + off
  *lo = off >= 0 ? 0 : (-off + s - 1) / s;
  *hi = in - off <= 0 ? 0 : std::min(out, (in - off + s - 1) / s);
  if (*hi < *lo) *hi = *lo;
}

// --- Conv (float and int8) ------------------------------------------------------

// `acc` is scratch for one output plane ([oH * oW]), owned by the kernel.
template <typename TX, typename TW, typename TAcc, typename Store>
void conv_loops(const Geom& g, const TX* x, const TW* w, TAcc x_zero, const std::vector<TAcc>& w_zero,
                const std::vector<TAcc>& bias, std::vector<TAcc>& acc, Store&& store) {
  const int64_t cg = g.C / g.group, mg = g.M / g.group;
  for (int64_t nb = 0; nb < g.N; ++nb) {
    for (int64_t m = 0; m < g.M; ++m) {
      const int64_t gi = m / mg;
      std::fill(acc.begin(), acc.end(), bias.empty() ? TAcc(0) : bias[static_cast<size_t>(m)]);
      const TAcc wz = w_zero.empty() ? TAcc(0) : w_zero[w_zero.size() == 1 ? 0 : static_cast<size_t>(m)];
      for (int64_t c = 0; c < cg; ++c) {
        const TX* xp = x + ((nb * g.C) + gi * cg + c) * g.H * g.W;
        const TW* wp = w + ((m * cg) + c) * g.kH * g.kW;
        for (int64_t kh = 0; kh < g.kH; ++kh) {
          int64_t oh0, oh1;
          valid_range(kh, g.sH, g.dH, g.pT, g.H, g.oH, &oh0, &oh1);
          for (int64_t kw = 0; kw < g.kW; ++kw) {
            const TAcc wv = static_cast<TAcc>(wp[kh * g.kW + kw]) - wz;
            int64_t ow0, ow1;
            valid_range(kw, g.sW, g.dW, g.pL, g.W, g.oW, &ow0, &ow1);
            for (int64_t oh = oh0; oh < oh1; ++oh) {
              const TX* row = xp + (oh * g.sH + kh * g.dH - g.pT) * g.W + kw * g.dW - g.pL;
              TAcc* ap = acc.data() + oh * g.oW;
              for (int64_t ow = ow0; ow < ow1; ++ow) ap[ow] += (static_cast<TAcc>(row[ow * g.sW]) - x_zero) * wv;
            }
          }
        }
      }
      store(nb, m, acc.data());
    }
  }
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

Kernel conv(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  if (in.size() < 2) bad_shape(n, "needs input and weight");
  if (in[0].dtype != DType::kFloat32) unsupported(n, "float Conv needs float32 input");
  const Tensor& w = need_const(n, consts, 1, "Conv weight");
  Geom g = conv_geom(n, in, w.shape());
  std::vector<float> bias;
  if (in.size() > 2 && !n.inputs[2].empty()) {
    const Tensor& b = need_const(n, consts, 2, "Conv bias");
    bias.assign(b.data<float>(), b.data<float>() + b.numel());
  }
  Kernel k;
  k.outputs = {{spatial_out(in[0].shape, g.M, g), DType::kFloat32}};
  Tensor wt = w;
  const float lo = n.fused_act == "Relu" ? 0.0f : n.fused_act == "Clip" ? n.clip_lo : -INFINITY;
  const float hi = n.fused_act == "Clip" ? n.clip_hi : INFINITY;
  auto acc = std::make_shared<std::vector<float>>(static_cast<size_t>(g.oH * g.oW));
  const std::vector<float> no_zero;
  k.run = [g, wt, bias, lo, hi, acc, no_zero](const In& i, const Out& o) {
    float* y = o[0]->data<float>();
    const int64_t plane = g.oH * g.oW;
    conv_loops<float, float, float>(g, i[0]->data<float>(), wt.data<float>(), 0.0f, no_zero, bias, *acc,
                                    [&](int64_t nb, int64_t m, const float* acc) {
                                      float* dst = y + (nb * g.M + m) * plane;
                                      for (int64_t p = 0; p < plane; ++p) dst[p] = std::min(std::max(acc[p], lo), hi);
                                    });
  };
  return k;
}

// --- int8 helpers -------------------------------------------------------------------

struct QRange {
  int32_t lo, hi;
};
QRange qrange(DType d) { return d == DType::kUInt8 ? QRange{0, 255} : QRange{-128, 127}; }

// Output clamp of a fused activation, in the output's integer domain.
QRange act_range(const Node& n) {
  QRange r = qrange(n.out_q.dtype);
  const float s = n.out_q.scale[0];
  const int32_t z = n.out_q.zero_point[0];
  if (n.fused_act == "Relu") r.lo = std::max(r.lo, z);
  if (n.fused_act == "Clip") {
    r.lo = std::max(r.lo, quantize_value(n.clip_lo, s, z, r.lo, r.hi));
    r.hi = std::min(r.hi, quantize_value(n.clip_hi, s, z, r.lo, r.hi));
  }
  return r;
}

template <typename T>
void store_q(void* dst, int64_t i, int32_t v) {
  static_cast<T*>(dst)[i] = static_cast<T>(v);
}

// Reads element i of an int8/uint8 tensor as int32.
inline int32_t qload(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kUInt8 ? t.data<uint8_t>()[i] : t.data<int8_t>()[i];
}

// Integer bias: an int32 initializer as is, or a float one quantized with scale in*w.
std::vector<int32_t> int_bias(const Node& n, const Tensor* b, int64_t M, const std::vector<float>& mult_in_w) {
  std::vector<int32_t> out(static_cast<size_t>(M), 0);
  if (!b) return out;
  if (b->numel() != M) bad_shape(n, "bias has " + std::to_string(b->numel()) + " values, expected " + std::to_string(M));
  for (int64_t m = 0; m < M; ++m) {
    if (b->dtype() == DType::kInt32) out[static_cast<size_t>(m)] = b->data<int32_t>()[m];
    else
      out[static_cast<size_t>(m)] = static_cast<int32_t>(std::nearbyint(b->data<float>()[m] / mult_in_w[static_cast<size_t>(m)]));
  }
  return out;
}

float per(const std::vector<float>& v, int64_t i) { return v.size() == 1 ? v[0] : v[static_cast<size_t>(i)]; }
int32_t per(const std::vector<int32_t>& v, int64_t i) { return v.size() == 1 ? v[0] : v[static_cast<size_t>(i)]; }

Kernel qconv(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Tensor& w = need_const(n, consts, 1, "QConv weight");
  Geom g = conv_geom(n, in, w.shape());
  const ir::QInfo &xq = n.in_q.at(0), &wq = n.in_q.at(1), &yq = n.out_q;
  std::vector<float> in_w(static_cast<size_t>(g.M)), mult(static_cast<size_t>(g.M));
  for (int64_t m = 0; m < g.M; ++m) {
    in_w[static_cast<size_t>(m)] = xq.scale[0] * per(wq.scale, m);
    mult[static_cast<size_t>(m)] = in_w[static_cast<size_t>(m)] / yq.scale[0];
  }
  const Tensor* b = in.size() > 2 && !n.inputs[2].empty() ? &need_const(n, consts, 2, "QConv bias") : nullptr;
  std::vector<int32_t> bias = int_bias(n, b, g.M, in_w);
  std::vector<int32_t> wz(static_cast<size_t>(g.M));
  for (int64_t m = 0; m < g.M; ++m) wz[static_cast<size_t>(m)] = per(wq.zero_point, m);
  Kernel k;
  k.outputs = {{spatial_out(in[0].shape, g.M, g), yq.dtype}};
  const QRange r = act_range(n);
  const int32_t zy = yq.zero_point[0], zx = xq.zero_point[0];
  Tensor wt = w;
  const bool xu8 = in[0].dtype == DType::kUInt8, yu8 = yq.dtype == DType::kUInt8, wu8 = w.dtype() == DType::kUInt8;
  auto acc = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(g.oH * g.oW));
  k.run = [=](const In& i, const Out& o) {
    const int64_t plane = g.oH * g.oW;
    void* y = o[0]->raw();
    auto store = [&](int64_t nb, int64_t m, const int32_t* acc) {
      const float mm = mult[static_cast<size_t>(m)];
      const int64_t base = (nb * g.M + m) * plane;
      for (int64_t p = 0; p < plane; ++p) {
        const int32_t v = requantize(acc[p], mm, zy, r.lo, r.hi);
        if (yu8) store_q<uint8_t>(y, base + p, v);
        else store_q<int8_t>(y, base + p, v);
      }
    };
    auto go = [&](auto* x, auto* wp) { conv_loops<std::remove_const_t<std::remove_pointer_t<decltype(x)>>,
                                                  std::remove_const_t<std::remove_pointer_t<decltype(wp)>>, int32_t>(
                                           g, x, wp, zx, wz, bias, *acc, store); };
    if (xu8 && !wu8) go(i[0]->data<uint8_t>(), wt.data<int8_t>());
    else if (!xu8 && !wu8) go(i[0]->data<int8_t>(), wt.data<int8_t>());
    else if (xu8) go(i[0]->data<uint8_t>(), wt.data<uint8_t>());
    else go(i[0]->data<int8_t>(), wt.data<uint8_t>());
  };
  return k;
}

// --- ConvTranspose (float, 2-D) ------------------------------------------------------

Kernel conv_transpose(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape& x = in[0].shape;
  if (x.size() != 4) unsupported(n, "only 2-D ConvTranspose ([N, C, H, W]) is supported");
  if (n.has("output_shape")) unsupported(n, "the output_shape attribute is not supported (use pads)");
  const Tensor& w = need_const(n, consts, 1, "ConvTranspose weight");
  const int64_t group = n.attr_i("group", 1);
  const Shape& ws = w.shape();
  if (ws.size() != 4 || ws[0] != x[1]) bad_shape(n, "weight " + shape_str(ws) + " does not match input " + shape_str(x));
  const int64_t C = x[1], M = ws[1] * group, kH = ws[2], kW = ws[3];
  auto s = n.attr_ints("strides", {1, 1}), d = n.attr_ints("dilations", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0}),
       op = n.attr_ints("output_padding", {0, 0});
  if (n.attr_s("auto_pad", "NOTSET") != "NOTSET") unsupported(n, "auto_pad on ConvTranspose");
  const int64_t oH = (x[2] - 1) * s[0] - p[0] - p[2] + d[0] * (kH - 1) + op[0] + 1;
  const int64_t oW = (x[3] - 1) * s[1] - p[1] - p[3] + d[1] * (kW - 1) + op[1] + 1;
  std::vector<float> bias(static_cast<size_t>(M), 0.0f);
  if (in.size() > 2 && !n.inputs[2].empty()) {
    const Tensor& b = need_const(n, consts, 2, "ConvTranspose bias");
    std::copy(b.data<float>(), b.data<float>() + M, bias.begin());
  }
  Kernel k;
  k.outputs = {{{x[0], M, oH, oW}, DType::kFloat32}};
  Tensor wt = w;
  const int64_t N = x[0], H = x[2], W = x[3];
  k.run = [=](const In& i, const Out& o) {
    const float* xp = i[0]->data<float>();
    const float* wp = wt.data<float>();
    float* y = o[0]->data<float>();
    const int64_t cg = C / group, mg = M / group;
    for (int64_t nb = 0; nb < N; ++nb)
      for (int64_t m = 0; m < M; ++m)
        std::fill(y + (nb * M + m) * oH * oW, y + (nb * M + m + 1) * oH * oW, bias[static_cast<size_t>(m)]);
    for (int64_t nb = 0; nb < N; ++nb)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t gi = c / cg;
        for (int64_t mm = 0; mm < mg; ++mm) {
          const int64_t m = gi * mg + mm;
          for (int64_t kh = 0; kh < kH; ++kh)
            for (int64_t kw = 0; kw < kW; ++kw) {
              const float wv = wp[((c * mg + mm) * kH + kh) * kW + kw];
              for (int64_t ih = 0; ih < H; ++ih) {
                const int64_t oh = ih * s[0] - p[0] + kh * d[0];
                if (oh < 0 || oh >= oH) continue;
                const float* xr = xp + ((nb * C + c) * H + ih) * W;
                float* yr = y + ((nb * M + m) * oH + oh) * oW;
                for (int64_t iw = 0; iw < W; ++iw) {
                  const int64_t ow = iw * s[1] - p[1] + kw * d[1];
                  if (ow >= 0 && ow < oW) yr[ow] += xr[iw] * wv;
                }
              }
            }
        }
      }
  };
  return k;
}

// --- Gemm / MatMul ----------------------------------------------------------------------

void matmul_f(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N, bool ta, bool tb) {
  std::fill(c, c + M * N, 0.0f);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t kk = 0; kk < K; ++kk) {
      const float av = ta ? a[kk * M + i] : a[i * K + kk];
      if (av == 0.0f) continue;
      float* cr = c + i * N;
      if (tb)
        for (int64_t j = 0; j < N; ++j) cr[j] += av * b[j * K + kk];
      else {
        const float* br = b + kk * N;
        for (int64_t j = 0; j < N; ++j) cr[j] += av * br[j];
      }
    }
}

Kernel gemm(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const bool ta = n.attr_i("transA", 0) != 0, tb = n.attr_i("transB", 0) != 0;
  const Shape &a = in[0].shape, &b = in[1].shape;
  if (a.size() != 2 || b.size() != 2) bad_shape(n, "Gemm needs 2-D inputs, got " + shape_str(a) + " and " + shape_str(b));
  const int64_t M = ta ? a[1] : a[0], K = ta ? a[0] : a[1], N = tb ? b[0] : b[1];
  if ((tb ? b[1] : b[0]) != K) bad_shape(n, "inner dimensions differ: " + shape_str(a) + " x " + shape_str(b));
  const float alpha = n.attr_f("alpha", 1.0f), beta = n.attr_f("beta", 1.0f);
  Shape cs;
  if (in.size() > 2 && !n.inputs[2].empty()) {
    cs = in[2].shape;
    broadcast(n, cs, {M, N});
  }
  Kernel k;
  k.outputs = {{{M, N}, DType::kFloat32}};
  const bool has_c = !cs.empty() || (in.size() > 2 && !n.inputs[2].empty());
  const float lo = n.fused_act == "Relu" ? 0.0f : n.fused_act == "Clip" ? n.clip_lo : -INFINITY;
  const float hi = n.fused_act == "Clip" ? n.clip_hi : INFINITY;
  k.run = [=](const In& i, const Out& o) {
    float* y = o[0]->data<float>();
    matmul_f(i[0]->data<float>(), i[1]->data<float>(), y, M, K, N, ta, tb);
    if (alpha != 1.0f)
      for (int64_t p = 0; p < M * N; ++p) y[p] *= alpha;
    if (has_c) {
      const float* c = i[2]->data<float>();
      for_each_broadcast({M, N}, {M, N}, cs, [&](int64_t p, int64_t, int64_t r) { y[p] += beta * c[r]; });
    }
    if (lo != -INFINITY || hi != INFINITY)
      for (int64_t p = 0; p < M * N; ++p) y[p] = std::min(std::max(y[p], lo), hi);
  };
  return k;
}

Kernel matmul(const Node& n, const std::vector<Meta>& in) {
  Shape a = in[0].shape, b = in[1].shape;
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  const int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
  if (b[b.size() - 2] != K) bad_shape(n, "inner dimensions differ: " + shape_str(in[0].shape) + " x " + shape_str(in[1].shape));
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  Shape batch = broadcast(n, ba, bb);
  Shape out = batch;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  Kernel k;
  k.outputs = {{out, DType::kFloat32}};
  k.run = [=](const In& i, const Out& o) {
    const float* x = i[0]->data<float>();
    const float* y = i[1]->data<float>();
    float* z = o[0]->data<float>();
    for_each_broadcast(batch, ba, bb, [&](int64_t p, int64_t q, int64_t r) {
      matmul_f(x + q * M * K, y + r * K * N, z + p * M * N, M, K, N, false, false);
    });
  };
  return k;
}

// QGemm / QMatMul with a constant int8 B: int32 accumulation, per-column requantization.
Kernel qgemm(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const bool is_gemm = n.op == "QGemm";
  const bool tb = is_gemm && n.attr_i("transB", 0) != 0;
  if (is_gemm && (n.attr_i("transA", 0) != 0 || n.attr_f("alpha", 1.0f) != 1.0f || n.attr_f("beta", 1.0f) != 1.0f))
    unsupported(n, "int8 Gemm needs transA=0, alpha=1, beta=1");
  const Tensor& bw = need_const(n, consts, 1, "int8 Gemm/MatMul weight");
  const Shape& a = in[0].shape;
  const Shape& b = bw.shape();
  if (b.size() != 2 || a.empty()) bad_shape(n, "int8 Gemm/MatMul needs a 2-D constant weight");
  const int64_t K = tb ? b[1] : b[0], N = tb ? b[0] : b[1];
  if (a.back() != K) bad_shape(n, "inner dimensions differ: " + shape_str(a) + " x " + shape_str(b));
  const int64_t M = numel(a) / K;
  const ir::QInfo &xq = n.in_q.at(0), &wq = n.in_q.at(1), &yq = n.out_q;
  std::vector<float> in_w(static_cast<size_t>(N)), mult(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) {
    in_w[static_cast<size_t>(j)] = xq.scale[0] * per(wq.scale, j);
    mult[static_cast<size_t>(j)] = in_w[static_cast<size_t>(j)] / yq.scale[0];
  }
  const Tensor* bias_t = in.size() > 2 && !n.inputs[2].empty() ? &need_const(n, consts, 2, "int8 Gemm bias") : nullptr;
  std::vector<int32_t> bias = int_bias(n, bias_t, N, in_w);
  Shape out(a.begin(), a.end() - 1);
  out.push_back(N);
  Kernel k;
  k.outputs = {{out, yq.dtype}};
  const QRange r = act_range(n);
  const int32_t zx = xq.zero_point[0], zy = yq.zero_point[0];
  std::vector<int32_t> wz(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) wz[static_cast<size_t>(j)] = per(wq.zero_point, j);
  Tensor wt = bw;
  const bool yu8 = yq.dtype == DType::kUInt8;
  auto acc_buf = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(N));
  k.run = [=](const In& i, const Out& o) {
    const Tensor& x = *i[0];
    std::vector<int32_t>& acc = *acc_buf;
    for (int64_t row = 0; row < M; ++row) {
      std::copy(bias.begin(), bias.end(), acc.begin());
      for (int64_t kk = 0; kk < K; ++kk) {
        const int32_t xv = qload(x, row * K + kk) - zx;
        if (xv == 0) continue;
        for (int64_t j = 0; j < N; ++j)
          acc[static_cast<size_t>(j)] += xv * (qload(wt, tb ? j * K + kk : kk * N + j) - wz[static_cast<size_t>(j)]);
      }
      for (int64_t j = 0; j < N; ++j) {
        const int32_t v = requantize(acc[static_cast<size_t>(j)], mult[static_cast<size_t>(j)], zy, r.lo, r.hi);
        if (yu8) store_q<uint8_t>(o[0]->raw(), row * N + j, v);
        else store_q<int8_t>(o[0]->raw(), row * N + j, v);
      }
    }
  };
  return k;
}

// --- pooling ----------------------------------------------------------------------------------

template <typename T>
void max_pool_loops(const Geom& g, const T* x, T* y) {
  for (int64_t p = 0; p < g.N * g.C; ++p) {
    const T* xp = x + p * g.H * g.W;
    T* yp = y + p * g.oH * g.oW;
    for (int64_t oh = 0; oh < g.oH; ++oh)
      for (int64_t ow = 0; ow < g.oW; ++ow) {
        T best = std::numeric_limits<T>::lowest();
        for (int64_t kh = 0; kh < g.kH; ++kh) {
          const int64_t ih = oh * g.sH + kh * g.dH - g.pT;
          if (ih < 0 || ih >= g.H) continue;
          for (int64_t kw = 0; kw < g.kW; ++kw) {
            const int64_t iw = ow * g.sW + kw * g.dW - g.pL;
            if (iw >= 0 && iw < g.W) best = std::max(best, xp[ih * g.W + iw]);
          }
        }
        yp[oh * g.oW + ow] = best;
      }
  }
}

// Average-pool windows: for each output position j, the sum of `load(input index)`
// over the window's in-bounds positions and the divisor (positions inside the
// padded input with count_include_pad, in-bounds positions otherwise).
template <typename T, typename Load, typename Emit>
void avg_pool_windows(const Geom& g, bool include_pad, Load&& load, Emit&& emit) {
  for (int64_t p = 0; p < g.N * g.C; ++p)
    for (int64_t oh = 0; oh < g.oH; ++oh)
      for (int64_t ow = 0; ow < g.oW; ++ow) {
        T sum = 0;
        int64_t cnt = 0, cnt_pad = 0;
        for (int64_t kh = 0; kh < g.kH; ++kh) {
          const int64_t ih = oh * g.sH + kh * g.dH - g.pT;
          for (int64_t kw = 0; kw < g.kW; ++kw) {
            const int64_t iw = ow * g.sW + kw * g.dW - g.pL;
            if (ih < g.H + g.pB && iw < g.W + g.pR) ++cnt_pad;
            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
            sum += load((p * g.H + ih) * g.W + iw);
            ++cnt;
          }
        }
        emit((p * g.oH + oh) * g.oW + ow, sum, include_pad ? cnt_pad : std::max<int64_t>(cnt, 1));
      }
}

Kernel pool(const Node& n, const std::vector<Meta>& in) {
  if (n.attr_i("storage_order", 0) != 0) unsupported(n, "storage_order=1");
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) unsupported(n, "the Indices output");
  Geom g = window_geom(n, in[0].shape, n.attr_ints("kernel_shape"), n.attr_i("ceil_mode", 0) != 0);
  Kernel k;
  const DType dt = in[0].dtype;
  k.outputs = {{spatial_out(in[0].shape, g.C, g), dt}};
  if (n.op == "MaxPool" || n.op == "QMaxPool") {
    k.run = [g, dt](const In& i, const Out& o) {
      if (dt == DType::kFloat32) max_pool_loops(g, i[0]->data<float>(), o[0]->data<float>());
      else if (dt == DType::kUInt8) max_pool_loops(g, i[0]->data<uint8_t>(), o[0]->data<uint8_t>());
      else max_pool_loops(g, i[0]->data<int8_t>(), o[0]->data<int8_t>());
    };
    return k;
  }
  const bool include_pad = n.attr_i("count_include_pad", 0) != 0;
  if (n.op == "QAveragePool") {
    // int8: the real mean sx * (sum - count * zx) / count, quantized with the output's qparams.
    const float sx = n.in_q.at(0).scale[0], sy = n.out_q.scale[0];
    const int32_t zx = n.in_q.at(0).zero_point[0], zy = n.out_q.zero_point[0];
    const QRange r = qrange(n.out_q.dtype);
    const bool yu8 = n.out_q.dtype == DType::kUInt8;
    k.outputs = {{spatial_out(in[0].shape, g.C, g), n.out_q.dtype}};
    k.run = [=](const In& i, const Out& o) {
      avg_pool_windows<int32_t>(g, include_pad, [&](int64_t j) { return qload(*i[0], j) - zx; },
                                [&](int64_t j, int32_t sum, int64_t count) {
                                  const int32_t v = requantize(sum, sx / (sy * static_cast<float>(count)), zy, r.lo, r.hi);
                                  if (yu8) store_q<uint8_t>(o[0]->raw(), j, v);
                                  else store_q<int8_t>(o[0]->raw(), j, v);
                                });
    };
    return k;
  }
  if (dt != DType::kFloat32) unsupported(n, "AveragePool needs float32 input");
  k.run = [g, include_pad](const In& i, const Out& o) {
    const float* x = i[0]->data<float>();
    float* y = o[0]->data<float>();
    avg_pool_windows<float>(g, include_pad, [x](int64_t j) { return x[j]; },
                            [y](int64_t j, float sum, int64_t count) { y[j] = sum / static_cast<float>(count); });
  };
  return k;
}

Kernel global_avg_pool(const Node& n, const std::vector<Meta>& in) {
  const Shape& x = in[0].shape;
  if (x.size() < 3) bad_shape(n, "needs [N, C, spatial...], got " + shape_str(x));
  Shape out = {x[0], x[1]};
  for (size_t i = 2; i < x.size(); ++i) out.push_back(1);
  const int64_t planes = x[0] * x[1], hw = numel(x) / planes;
  Kernel k;
  const bool q = n.op == "QGlobalAveragePool";
  k.outputs = {{out, q ? n.out_q.dtype : DType::kFloat32}};
  if (!q) {
    k.run = [planes, hw](const In& i, const Out& o) {
      const float* xp = i[0]->data<float>();
      float* y = o[0]->data<float>();
      for (int64_t p = 0; p < planes; ++p) {
        float s = 0;
        for (int64_t j = 0; j < hw; ++j) s += xp[p * hw + j];
        y[p] = s / static_cast<float>(hw);
      }
    };
    return k;
  }
  // int8: real mean = sx * (sum - hw * zx) / hw, quantized with the output's qparams.
  const float sx = n.in_q.at(0).scale[0], sy = n.out_q.scale[0];
  const int32_t zx = n.in_q.at(0).zero_point[0], zy = n.out_q.zero_point[0];
  const QRange r = qrange(n.out_q.dtype);
  const bool yu8 = n.out_q.dtype == DType::kUInt8;
  k.run = [=](const In& i, const Out& o) {
    for (int64_t p = 0; p < planes; ++p) {
      int64_t s = 0;
      for (int64_t j = 0; j < hw; ++j) s += qload(*i[0], p * hw + j);
      const int32_t acc = static_cast<int32_t>(s - hw * zx);
      const int32_t v = requantize(acc, sx / (sy * static_cast<float>(hw)), zy, r.lo, r.hi);
      if (yu8) store_q<uint8_t>(o[0]->raw(), p, v);
      else store_q<int8_t>(o[0]->raw(), p, v);
    }
  };
  return k;
}

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
  if (n.op == "Flatten" || n.op == "QFlatten") {
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
        known *= s[i];
      }
    }
    if (infer >= 0) s[static_cast<size_t>(infer)] = known ? numel(x) / known : 0;
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
    for (auto a : axes) ins[static_cast<size_t>(norm_axis(n, a, r))] = true;
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
  Shape out;
  for (auto p : perm) out.push_back(x[static_cast<size_t>(norm_axis(n, p, x.size()))]);
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
  const bool q = n.op == "QConcat";
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
            const float real = iq[t].scale[0] * static_cast<float>(qload(*i[t], r * w + j) - iq[t].zero_point[0]);
            const int32_t v = quantize_value(real, oq.scale[0], oq.zero_point[0], rr.lo, rr.hi);
            if (oq.dtype == DType::kUInt8) store_q<uint8_t>(dst, r * total_w + col + j, v);
            else store_q<int8_t>(dst, r * total_w + col + j, v);
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
  std::vector<int64_t> st(x.size(), 0), step(x.size(), 1);
  Shape out = x;
  for (size_t j = 0; j < axes.size(); ++j) {
    const size_t a = static_cast<size_t>(norm_axis(n, axes[j], x.size()));
    const int64_t d = x[a], s = steps[j];
    if (s == 0) bad_shape(n, "step 0");
    auto clampi = [](int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); };
    int64_t b = starts[j] < 0 ? starts[j] + d : starts[j];
    int64_t e = ends[j] < 0 ? ends[j] + d : ends[j];
    if (s > 0) {
      b = clampi(b, 0, d);
      e = clampi(e, 0, d);
      out[a] = e > b ? (e - b + s - 1) / s : 0;
    } else {
      b = clampi(b, 0, d - 1);
      e = clampi(e, -1, d - 1);
      out[a] = b > e ? (b - e - s - 1) / -s : 0;
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

Kernel pad(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  if (n.attr_s("mode", "constant") != "constant") unsupported(n, "Pad mode '" + n.attr_s("mode") + "' (only constant)");
  const Shape& x = in[0].shape;
  auto pads = int_values(need_const(n, consts, 1, "Pad pads"));
  if (pads.size() != 2 * x.size()) bad_shape(n, "pads must have 2 * rank values");
  if (n.inputs.size() > 3 && !n.inputs[3].empty()) unsupported(n, "the axes input");
  float value = 0;
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) value = float_value(need_const(n, consts, 2, "Pad value"));
  if (in[0].dtype != DType::kFloat32) unsupported(n, "float32 input only");
  Shape out = x;
  for (size_t d = 0; d < x.size(); ++d) {
    if (pads[d] < 0 || pads[d + x.size()] < 0) unsupported(n, "negative pads");
    out[d] += pads[d] + pads[d + x.size()];
  }
  Kernel k;
  k.outputs = {{out, DType::kFloat32}};
  k.run = [=](const In& i, const Out& o) {
    float* y = o[0]->data<float>();
    std::fill(y, y + numel(out), value);
    const float* src = i[0]->data<float>();
    const int64_t total = numel(x);
    Index idx{};
    for (int64_t p = 0; p < total; ++p) {
      int64_t off = 0;
      for (size_t d = 0; d < x.size(); ++d) off = off * out[d] + idx[d] + pads[d];
      y[off] = src[p];
      for (size_t d = x.size(); d-- > 0;) {
        if (++idx[d] < x[d]) break;
        idx[d] = 0;
      }
    }
  };
  return k;
}

Kernel softmax(const Node& n, const std::vector<Meta>& in) {
  const Shape& x = in[0].shape;
  const int64_t axis = norm_axis(n, n.attr_i("axis", -1), x.size());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) inner *= x[d];
  const int64_t dim = x[static_cast<size_t>(axis)];
  Kernel k;
  k.outputs = {{x, DType::kFloat32}};
  k.run = [=](const In& i, const Out& o) {
    const float* xp = i[0]->data<float>();
    float* y = o[0]->data<float>();
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t b = 0; b < inner; ++b) {
        const int64_t base = a * dim * inner + b;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < dim; ++j) mx = std::max(mx, xp[base + j * inner]);
        float s = 0;
        for (int64_t j = 0; j < dim; ++j) s += (y[base + j * inner] = std::exp(xp[base + j * inner] - mx));
        for (int64_t j = 0; j < dim; ++j) y[base + j * inner] /= s;
      }
  };
  return k;
}

Kernel batch_norm(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  if (n.outputs.size() > 1) unsupported(n, "training-mode BatchNormalization (more than one output)");
  const Shape& x = in[0].shape;
  const int64_t C = x.size() > 1 ? x[1] : 1;
  const Tensor &sc = need_const(n, consts, 1, "BatchNormalization scale"), &b = need_const(n, consts, 2, "bias"),
               &mean = need_const(n, consts, 3, "mean"), &var = need_const(n, consts, 4, "var");
  const float eps = n.attr_f("epsilon", 1e-5f);
  std::vector<float> mul(static_cast<size_t>(C)), add(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    mul[static_cast<size_t>(c)] = sc.data<float>()[c] / std::sqrt(var.data<float>()[c] + eps);
    add[static_cast<size_t>(c)] = b.data<float>()[c] - mean.data<float>()[c] * mul[static_cast<size_t>(c)];
  }
  const int64_t inner = x.size() > 2 ? numel(x) / (x[0] * C) : 1, N = x[0];
  Kernel k;
  k.outputs = {{x, DType::kFloat32}};
  k.run = [=](const In& i, const Out& o) {
    const float* xp = i[0]->data<float>();
    float* y = o[0]->data<float>();
    for (int64_t nb = 0; nb < N; ++nb)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t base = (nb * C + c) * inner;
        for (int64_t j = 0; j < inner; ++j) y[base + j] = xp[base + j] * mul[static_cast<size_t>(c)] + add[static_cast<size_t>(c)];
      }
  };
  return k;
}

Kernel reduce_mean(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape& x = in[0].shape;
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) axes = int_values(need_const(n, consts, 1, "ReduceMean axes"));
  std::vector<bool> red(x.size(), axes.empty());
  for (auto a : axes) red[static_cast<size_t>(norm_axis(n, a, x.size()))] = true;
  const bool keep = n.attr_i("keepdims", 1) != 0;
  Shape out, kept;
  for (size_t d = 0; d < x.size(); ++d) {
    if (red[d]) {
      if (keep) out.push_back(1);
    } else {
      out.push_back(x[d]);
    }
    kept.push_back(red[d] ? 1 : x[d]);
  }
  Kernel k;
  k.outputs = {{out, DType::kFloat32}};
  const int64_t count = numel(x) / numel(kept);
  k.run = [=](const In& i, const Out& o) {
    float* y = o[0]->data<float>();
    std::fill(y, y + numel(kept), 0.0f);
    for_each_broadcast(x, x, kept, [&](int64_t p, int64_t, int64_t r) { y[r] += i[0]->data<float>()[p]; });
    for (int64_t p = 0; p < numel(kept); ++p) y[p] /= static_cast<float>(count);
  };
  return k;
}

Kernel resize(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape& x = in[0].shape;
  if (x.size() != 4) unsupported(n, "only 4-D [N, C, H, W] Resize is supported");
  const std::string mode = n.attr_s("mode", "nearest");
  const std::string ctm = n.attr_s("coordinate_transformation_mode", "half_pixel");
  const std::string nm = n.attr_s("nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear") unsupported(n, "mode '" + mode + "' (nearest or linear)");
  Shape out = x;
  std::vector<float> scale = {1, 1, 1, 1};
  if (n.inputs.size() > 3 && !n.inputs[3].empty()) {
    auto s = int_values(need_const(n, consts, 3, "Resize sizes"));
    out.assign(s.begin(), s.end());
    for (size_t d = 0; d < 4; ++d) scale[d] = static_cast<float>(out[d]) / static_cast<float>(x[d]);
  } else {
    const Tensor& sc = need_const(n, consts, 2, "Resize scales");
    if (sc.numel() != 4) bad_shape(n, "scales must have 4 values");
    for (size_t d = 0; d < 4; ++d) {
      scale[d] = sc.data<float>()[d];
      out[d] = static_cast<int64_t>(std::floor(static_cast<float>(x[d]) * scale[d]));
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

// --- Quantize / Dequantize ----------------------------------------------------------------

ir::QInfo qinfo_of(const Node& n, const std::vector<const Tensor*>& consts, size_t scale_i, size_t zp_i, DType dt) {
  ir::QInfo q;
  const Tensor& s = need_const(n, consts, scale_i, "scale");
  q.scale.assign(s.data<float>(), s.data<float>() + s.numel());
  q.dtype = dt;
  if (zp_i < n.inputs.size() && !n.inputs[zp_i].empty()) {
    const Tensor& z = need_const(n, consts, zp_i, "zero_point");
    q.dtype = z.dtype();
    for (int64_t i = 0; i < z.numel(); ++i) q.zero_point.push_back(qload(z, i));
  } else {
    q.zero_point.assign(q.scale.size(), 0);
  }
  q.axis = n.attr_i("axis", 1);
  return q;
}

// Channels and elements per channel slice of `x` for (per-channel) qparams `q`.
void channel_layout(const Node& n, const ir::QInfo& q, const Shape& x, int64_t* channels, int64_t* inner) {
  const int64_t axis = q.per_channel() ? norm_axis(n, q.axis, x.size()) : 0;
  *inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) *inner *= x[d];
  *channels = q.per_channel() ? x[static_cast<size_t>(axis)] : 1;
  if (q.per_channel() && static_cast<int64_t>(q.scale.size()) != *channels)
    bad_shape(n, std::to_string(q.scale.size()) + " scales for " + std::to_string(*channels) + " channels");
}

Kernel quantize(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  ir::QInfo q = qinfo_of(n, consts, 1, 2, DType::kUInt8);
  const Shape& x = in[0].shape;
  int64_t C, inner;
  channel_layout(n, q, x, &C, &inner);
  Kernel k;
  k.outputs = {{x, q.dtype}};
  const QRange r = qrange(q.dtype);
  k.run = [=](const In& i, const Out& o) {
    const float* xp = i[0]->data<float>();
    const int64_t t = i[0]->numel();
    for (int64_t p = 0; p < t; ++p) {
      const int64_t c = C == 1 ? 0 : (p / inner) % C;
      const int32_t v = quantize_value(xp[p], per(q.scale, c), per(q.zero_point, c), r.lo, r.hi);
      if (q.dtype == DType::kUInt8) store_q<uint8_t>(o[0]->raw(), p, v);
      else store_q<int8_t>(o[0]->raw(), p, v);
    }
  };
  return k;
}

Kernel dequantize(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  ir::QInfo q = qinfo_of(n, consts, 1, 2, in[0].dtype);
  const Shape& x = in[0].shape;
  int64_t C, inner;
  channel_layout(n, q, x, &C, &inner);
  Kernel k;
  k.outputs = {{x, DType::kFloat32}};
  k.run = [=](const In& i, const Out& o) {
    float* y = o[0]->data<float>();
    const int64_t t = i[0]->numel();
    const bool i32 = i[0]->dtype() == DType::kInt32;
    for (int64_t p = 0; p < t; ++p) {
      const int64_t c = C == 1 ? 0 : (p / inner) % C;
      const int32_t v = i32 ? i[0]->data<int32_t>()[p] : qload(*i[0], p);
      y[p] = static_cast<float>(v - per(q.zero_point, c)) * per(q.scale, c);
    }
  };
  return k;
}

// int8 elementwise: QAdd / QMul (real-valued op, re-quantized), QRelu / QClip.
Kernel qbinary(const Node& n, const std::vector<Meta>& in) {
  const Shape o = broadcast(n, in[0].shape, in[1].shape);
  Kernel k;
  k.outputs = {{o, n.out_q.dtype}};
  const ir::QInfo a = n.in_q.at(0), b = n.in_q.at(1), y = n.out_q;
  const Shape sa = in[0].shape, sb = in[1].shape;
  const QRange r = act_range(n);
  const bool add = n.op == "QAdd";
  k.run = [=](const In& i, const Out& out) {
    for_each_broadcast(o, sa, sb, [&](int64_t p, int64_t q, int64_t s) {
      const float ra = a.scale[0] * static_cast<float>(qload(*i[0], q) - a.zero_point[0]);
      const float rb = b.scale[0] * static_cast<float>(qload(*i[1], s) - b.zero_point[0]);
      const int32_t v = quantize_value(add ? ra + rb : ra * rb, y.scale[0], y.zero_point[0], r.lo, r.hi);
      if (y.dtype == DType::kUInt8) store_q<uint8_t>(out[0]->raw(), p, v);
      else store_q<int8_t>(out[0]->raw(), p, v);
    });
  };
  return k;
}

Kernel qunary(const Node& n, const std::vector<Meta>& in) {
  Kernel k;
  k.outputs = {{in[0].shape, n.out_q.dtype}};
  const ir::QInfo a = n.in_q.at(0), y = n.out_q;
  const QRange r = act_range(n);
  k.run = [=](const In& i, const Out& out) {
    for (int64_t p = 0; p < i[0]->numel(); ++p) {
      const float ra = a.scale[0] * static_cast<float>(qload(*i[0], p) - a.zero_point[0]);
      const int32_t v = quantize_value(ra, y.scale[0], y.zero_point[0], r.lo, r.hi);
      if (y.dtype == DType::kUInt8) store_q<uint8_t>(out[0]->raw(), p, v);
      else store_q<int8_t>(out[0]->raw(), p, v);
    }
  };
  return k;
}

}  // namespace

Kernel make_kernel(const ir::Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts,
                   Backend backend, bool nhwc_out) {
  if (backend == Backend::kOneDNN) {
    Kernel k;
    if (make_onednn_kernel(n, in, consts, &k, nhwc_out)) return k;
    if (make_simd_kernel(n, in, consts, &k, nhwc_out)) return k;
  }
  for (const auto& m : in)
    if (m.shape.size() > kMaxRank) unsupported(n, "tensors of rank above " + std::to_string(kMaxRank));
  const std::string& op = n.op;
  if (in.empty()) bad_shape(n, "missing input");
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return binary(n, in);
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "Erf" || op == "Sqrt" || op == "Exp" || op == "Neg" ||
      op == "HardSwish" || op == "LeakyRelu" || op == "HardSigmoid" || op == "Gelu" || op == "Clip")
    return unary(n, in, consts);
  if (op == "Conv") return conv(n, in, consts);
  if (op == "QConv") return qconv(n, in, consts);
  if (op == "ConvTranspose") return conv_transpose(n, in, consts);
  if (op == "Gemm") return gemm(n, in, consts);
  if (op == "MatMul") return matmul(n, in);
  if (op == "QGemm" || op == "QMatMul") return qgemm(n, in, consts);
  if (op == "MaxPool" || op == "AveragePool" || op == "QMaxPool" || op == "QAveragePool") return pool(n, in);
  if (op == "GlobalAveragePool" || op == "QGlobalAveragePool") return global_avg_pool(n, in);
  if (op == "Flatten" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze") return reshape(n, in, consts);
  if (op == "Transpose") return transpose(n, in);
  if (op == "Identity") return copy_as(in[0].shape, in[0].dtype);
  if (op == "Concat" || op == "QConcat") return concat(n, in);
  if (op == "Slice") return slice(n, in, consts);
  if (op == "Pad") return pad(n, in, consts);
  if (op == "Softmax") return softmax(n, in);
  if (op == "BatchNormalization") return batch_norm(n, in, consts);
  if (op == "ReduceMean") return reduce_mean(n, in, consts);
  if (op == "Resize") return resize(n, in, consts);
  if (op == "QuantizeLinear") return quantize(n, in, consts);
  if (op == "DequantizeLinear") return dequantize(n, in, consts);
  if (op == "QAdd" || op == "QMul") return qbinary(n, in);
  if (op == "QRelu" || op == "QClip") return qunary(n, in);
  throw UnsupportedOpError(n.label() + ": op '" + op + "' is not supported by the qfx runtime");
}

}  // namespace qfx::runtime
