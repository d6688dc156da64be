// Reference kernels: float elementwise (broadcasting binary ops and Pow, activations and math functions),
// Softmax, BatchNormalization, and int8 QLinearAdd / QLinearMul / QRelu / QClip.
#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

Kernel binary(const Node& n, const std::vector<Meta>& in) {
  Kernel k;
  const Shape o = broadcast(n, in[0].shape, in[1].shape);
  k.outputs = {{o, DType::kFloat32}};
  if (in[0].dtype != DType::kFloat32 || in[1].dtype != DType::kFloat32) unsupported(n, "only float32 inputs are supported");
  const Shape a = in[0].shape, b = in[1].shape;
  const std::string op = n.op;
  const float lo = n.act_bounds().first, hi = n.act_bounds().second;
  k.run = [o, a, b, op, lo, hi](const In& i, const Out& out) {
    const float* x = i[0]->data<float>();
    const float* y = i[1]->data<float>();
    float* z = out[0]->data<float>();
    if (op == "Add")
      for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = std::min(std::max(x[q] + y[r], lo), hi); });
    else if (op == "Sub") for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = x[q] - y[r]; });
    else if (op == "Mul") for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = x[q] * y[r]; });
    else if (op == "Pow") for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = std::pow(x[q], y[r]); });
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
  else if (op == "Abs") f = [](float x) { return std::fabs(x); };
  else if (op == "Log") f = [](float x) { return std::log(x); };
  else if (op == "Reciprocal") f = [](float x) { return 1.0f / x; };
  else if (op == "Floor") f = [](float x) { return std::floor(x); };
  else if (op == "Ceil") f = [](float x) { return std::ceil(x); };
  else if (op == "Sin") f = [](float x) { return std::sin(x); };
  else if (op == "Cos") f = [](float x) { return std::cos(x); };
  else if (op == "Sign") f = [](float x) { return static_cast<float>((x > 0) - (x < 0)); };
  else if (op == "Softplus") f = [](float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); };
  else if (op == "HardSwish") f = [](float x) { return x * std::min(std::max(x / 6.0f + 0.5f, 0.0f), 1.0f); };
  else if (op == "LeakyRelu") {
    const float a = n.attr_f("alpha", 0.01f);
    f = [a](float x) { return x >= 0 ? x : a * x; };
  } else if (op == "Elu") {
    const float a = n.attr_f("alpha", 1.0f);
    f = [a](float x) { return x > 0 ? x : a * std::expm1(x); };
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
// Softmax along `axis` (ONNX opset 13), or its logarithm x - max - log(sum exp(x - max))
// (LogSoftmax) when `log`.
Kernel softmax(const Node& n, const std::vector<Meta>& in, bool log) {
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
        if (log) {
          const float ls = std::log(s);
          for (int64_t j = 0; j < dim; ++j) y[base + j * inner] = xp[base + j * inner] - mx - ls;
          continue;
        }
        for (int64_t j = 0; j < dim; ++j) y[base + j * inner] /= s;
      }
  };
  return k;
}

Kernel batch_norm(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  if (n.outputs.size() > 1) unsupported(n, "training-mode BatchNormalization (more than one output)");
  const Shape& x = in[0].shape;
  if (x.size() < 2) bad_shape(n, "needs an [N, C, ...] input, got " + shape_str(x));
  const int64_t C = x[1];
  const DType f = DType::kFloat32;
  const Tensor &sc = need_const(n, consts, 1, "BatchNormalization scale", f, C), &b = need_const(n, consts, 2, "bias", f, C),
               &mean = need_const(n, consts, 3, "mean", f, C), &var = need_const(n, consts, 4, "var", f, C);
  const float eps = n.attr_f("epsilon", 1e-5f);
  std::vector<float> mul(static_cast<size_t>(C)), add(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    mul[static_cast<size_t>(c)] = sc.data<float>()[c] / std::sqrt(var.data<float>()[c] + eps);
    add[static_cast<size_t>(c)] = b.data<float>()[c] - mean.data<float>()[c] * mul[static_cast<size_t>(c)];
  }
  const int64_t inner = inner_numel(x, 2), N = x[0];
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

// int8 elementwise: QLinearAdd / QLinearMul (real-valued op, re-quantized), QRelu / QClip.
Kernel qbinary(const Node& n, const std::vector<Meta>& in) {
  const Shape o = broadcast(n, in[0].shape, in[1].shape);
  Kernel k;
  k.outputs = {{o, n.out_q.dtype}};
  const ir::QInfo a = n.in_q.at(0), b = n.in_q.at(1), y = n.out_q;
  const Shape sa = in[0].shape, sb = in[1].shape;
  const QRange r = act_range(n);
  const bool add = n.op == "QLinearAdd";
  if (n.arithmetic.elementwise != RequantMode::kFloat) {
    // A target's integer add (TFLite's int8 add): each input's (q - zp) shifted
    // left, rescaled to the common scale 2 max(sa, sb), summed, rescaled to the
    // output; mul rescales the product of the integer differences once.
    const int shift = n.arithmetic.elementwise_left_shift;
    const ElementwiseRescales rs = elementwise_rescales(n);
    const Requantizer ra = rs.a, rb = rs.b, ro = rs.out;
    k.run = [=](const In& i, const Out& out) {
      ro.dispatch([&](auto m, auto rd) {  // all three share the elementwise mode and rounding
        constexpr RequantMode M = decltype(m)::value;
        constexpr Rounding R = decltype(rd)::value;
        for_each_broadcast(o, sa, sb, [&](int64_t p, int64_t q, int64_t s) {
          const int64_t da = qload(*i[0], q) - a.zero_point[0], db = qload(*i[1], s) - b.zero_point[0];
          const int64_t acc = add ? int64_t{ra.scaled_as<M, R>(da * (int64_t{1} << shift), 0)} +
                                        rb.scaled_as<M, R>(db * (int64_t{1} << shift), 0)
                                  : da * db;
          const int32_t v = ro.code_as<M, R>(acc, 0, y.zero_point[0], r.lo, r.hi);
          store_code(y.dtype, out[0]->raw(), p, v);
        });
      });
    };
    return k;
  }
  k.run = [=](const In& i, const Out& out) {
    for_each_broadcast(o, sa, sb, [&](int64_t p, int64_t q, int64_t s) {
      const float ra = a.scale[0] * static_cast<float>(qload(*i[0], q) - a.zero_point[0]);
      const float rb = b.scale[0] * static_cast<float>(qload(*i[1], s) - b.zero_point[0]);
      const int32_t v = quantize_value(add ? ra + rb : ra * rb, y.scale[0], y.zero_point[0], r.lo, r.hi);
      store_code(y.dtype, out[0]->raw(), p, v);
    });
  };
  return k;
}

Kernel qunary(const Node& n, const std::vector<Meta>& in) {
  Kernel k;
  k.outputs = {{in[0].shape, n.out_q.dtype}};
  const ir::QInfo a = n.in_q.at(0), y = n.out_q;
  const QRange r = act_range(n);
  if (n.arithmetic.elementwise != RequantMode::kFloat) {  // a target's rescale: a table of its 256 codes
    const Requantizer rq = Requantizer::rescale(n.arithmetic, {a.scale[0] / y.scale[0]}, n.label());
    const int lo = in[0].dtype == DType::kUInt8 ? 0 : -128;
    std::array<int32_t, 256> table{};
    for (int c = 0; c < 256; ++c) table[static_cast<size_t>(c)] = rq.code(lo + c - a.zero_point[0], 0, y.zero_point[0], r.lo, r.hi);
    k.run = [=](const In& i, const Out& out) {
      for (int64_t p = 0; p < i[0]->numel(); ++p) {
        const int32_t v = table[static_cast<size_t>(qload(*i[0], p) - lo)];
        store_code(y.dtype, out[0]->raw(), p, v);
      }
    };
    return k;
  }
  k.run = [=](const In& i, const Out& out) {
    for (int64_t p = 0; p < i[0]->numel(); ++p) {
      const float ra = a.scale[0] * static_cast<float>(qload(*i[0], p) - a.zero_point[0]);
      const int32_t v = quantize_value(ra, y.scale[0], y.zero_point[0], r.lo, r.hi);
      store_code(y.dtype, out[0]->raw(), p, v);
    }
  };
  return k;
}


}  // namespace

void register_reference_elementwise() {
  add_reference({"Add", "Sub", "Mul", "Div", "Pow"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return binary(n, in); });
  add_reference({"Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Neg", "HardSwish", "LeakyRelu", "HardSigmoid", "Gelu",
                 "Clip", "Abs", "Log", "Reciprocal", "Floor", "Ceil", "Sin", "Cos", "Sign", "Softplus", "Elu"},
                unary);
  add_reference({"Softmax"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return softmax(n, in, false); });
  add_reference({"LogSoftmax"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return softmax(n, in, true); });
  add_reference({"BatchNormalization"}, batch_norm);
  add_reference({"QLinearAdd", "QLinearMul"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return qbinary(n, in); }, true);
  add_reference({"QRelu", "QClip"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return qunary(n, in); }, true);
}

}  // namespace qfx::runtime
