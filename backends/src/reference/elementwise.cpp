// Reference kernels: float elementwise (activations and math functions; Neg, Abs and
// Sign also on int64 / int32; IsNaN, IsInf), Softmax, BatchNormalization, and int8
// QLinearAdd / QLinearMul / QRelu / QClip. Binary arithmetic is binary.cpp.
#include <map>
#include <type_traits>

#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

// The attribute-free float functions, by op (ONNX operator spec; Round: half to even).
float (*plain_fn(const std::string& op))(float) {
  using F = float (*)(float);
  static const std::map<std::string, F> fns = {
      {"Relu", [](float x) { return x > 0 ? x : 0.0f; }},
      {"Sigmoid", [](float x) { return 1.0f / (1.0f + std::exp(-x)); }},
      {"Tanh", [](float x) { return std::tanh(x); }},
      {"Erf", [](float x) { return std::erf(x); }},
      {"Sqrt", [](float x) { return std::sqrt(x); }},
      {"Exp", [](float x) { return std::exp(x); }},
      {"Neg", [](float x) { return -x; }},
      {"Abs", [](float x) { return std::fabs(x); }},
      {"Log", [](float x) { return std::log(x); }},
      {"Reciprocal", [](float x) { return 1.0f / x; }},
      {"Floor", [](float x) { return std::floor(x); }},
      {"Ceil", [](float x) { return std::ceil(x); }},
      {"Round", [](float x) { return std::nearbyint(x); }},  // the default rounding mode: half to even
      {"Sin", [](float x) { return std::sin(x); }},
      {"Cos", [](float x) { return std::cos(x); }},
      {"Tan", [](float x) { return std::tan(x); }},
      {"Asin", [](float x) { return std::asin(x); }},
      {"Acos", [](float x) { return std::acos(x); }},
      {"Atan", [](float x) { return std::atan(x); }},
      {"Sinh", [](float x) { return std::sinh(x); }},
      {"Cosh", [](float x) { return std::cosh(x); }},
      {"Asinh", [](float x) { return std::asinh(x); }},
      {"Acosh", [](float x) { return std::acosh(x); }},
      {"Atanh", [](float x) { return std::atanh(x); }},
      {"Sign", [](float x) { return static_cast<float>((x > 0) - (x < 0)); }},
      {"Softplus", [](float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }},
      {"HardSwish", [](float x) { return x * std::min(std::max(x / 6.0f + 0.5f, 0.0f), 1.0f); }},
  };
  auto it = fns.find(op);
  return it == fns.end() ? nullptr : it->second;
}

// The float function of a unary op with attributes or constant inputs.
std::function<float(float)> attr_fn(const Node& n, const std::vector<const Tensor*>& consts) {
  const std::string& op = n.op;
  if (op == "LeakyRelu") {
    const float a = n.attr_f("alpha", 0.01f);
    return [a](float x) { return x >= 0 ? x : a * x; };
  }
  if (op == "Elu") {
    const float a = n.attr_f("alpha", 1.0f);
    return [a](float x) { return x > 0 ? x : a * std::expm1(x); };
  }
  if (op == "HardSigmoid") {
    const float a = n.attr_f("alpha", 0.2f), b = n.attr_f("beta", 0.5f);
    return [a, b](float x) { return std::min(std::max(a * x + b, 0.0f), 1.0f); };
  }
  if (op == "Gelu") {
    if (n.attr_s("approximate", "none") == "tanh")
      return [](float x) { return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x))); };
    return [](float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678f)); };
  }
  if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (consts.size() > 1 && !n.inputs[1].empty()) lo = float_value(need_const(n, consts, 1, "Clip min"));
    if (consts.size() > 2 && !n.inputs[2].empty()) hi = float_value(need_const(n, consts, 2, "Clip max"));
    return [lo, hi](float x) { return std::min(std::max(x, lo), hi); };
  }
  unsupported(n, "unknown unary op");
}

// Neg, Abs, Sign on int64 / int32 (Neg and Abs of the minimum wrap to the minimum).
template <typename T>
Kernel int_unary(const Node& n, const Shape& s, DType dt) {
  Kernel k;
  k.outputs = {{s, dt}};
  using U = std::make_unsigned_t<T>;
  const int which = n.op == "Neg" ? 0 : n.op == "Abs" ? 1 : 2;
  k.run = [which](const In& i, const Out& o) {
    const T* x = i[0]->data<T>();
    T* y = o[0]->data<T>();
    for (int64_t p = 0; p < i[0]->numel(); ++p) {
      const T v = x[p];
      const T neg = static_cast<T>(static_cast<U>(U{0} - static_cast<U>(v)));
      y[p] = which == 0 ? neg : which == 1 ? (v < 0 ? neg : v) : static_cast<T>((v > 0) - (v < 0));
    }
  };
  return k;
}

Kernel unary(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const DType dt = in[0].dtype;
  const bool int_ok = n.op == "Neg" || n.op == "Abs" || n.op == "Sign";
  if (int_ok && dt == DType::kInt64) return int_unary<int64_t>(n, in[0].shape, dt);
  if (int_ok && dt == DType::kInt32) return int_unary<int32_t>(n, in[0].shape, dt);
  if (dt != DType::kFloat32)
    unsupported(n, std::string("input is ") + dtype_name(dt) + "; only float32" + (int_ok ? ", int64 and int32 are" : " is") + " supported");
  Kernel k;
  k.outputs = {{in[0].shape, DType::kFloat32}};
  const auto run = [](auto f) {
    return [f](const In& i, const Out& o) {
      const float* x = i[0]->data<float>();
      float* y = o[0]->data<float>();
      const int64_t t = i[0]->numel();
      for (int64_t p = 0; p < t; ++p) y[p] = f(x[p]);
    };
  };
  if (auto f = plain_fn(n.op)) k.run = run(f);
  else k.run = run(attr_fn(n, consts));
  return k;
}

// IsNaN, IsInf (detect_positive, detect_negative; default both) on float32 -> bool.
Kernel is_nan_inf(const Node& n, const std::vector<Meta>& in) {
  check_dtype(n, in[0].dtype, {DType::kFloat32});
  Kernel k;
  k.outputs = {{in[0].shape, DType::kBool}};
  const bool nan = n.op == "IsNaN", pos = n.attr_i("detect_positive", 1) != 0, neg = n.attr_i("detect_negative", 1) != 0;
  k.run = [nan, pos, neg](const In& i, const Out& o) {
    const float* x = i[0]->data<float>();
    auto* y = static_cast<uint8_t*>(o[0]->raw());
    for (int64_t p = 0; p < i[0]->numel(); ++p)
      y[p] = nan ? std::isnan(x[p]) : std::isinf(x[p]) && (x[p] > 0 ? pos : neg);
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
  add_reference({"Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Neg", "HardSwish", "LeakyRelu", "HardSigmoid", "Gelu",
                 "Clip", "Abs", "Log", "Reciprocal", "Floor", "Ceil", "Sin", "Cos", "Sign", "Softplus", "Elu", "Round", "Tan",
                 "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"},
                unary);
  add_reference({"IsNaN", "IsInf"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return is_nan_inf(n, in); });
  add_reference({"Softmax"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return softmax(n, in, false); });
  add_reference({"LogSoftmax"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return softmax(n, in, true); });
  add_reference({"BatchNormalization"}, batch_norm);
  add_reference({"QLinearAdd", "QLinearMul"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return qbinary(n, in); }, true);
  add_reference({"QRelu", "QClip"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return qunary(n, in); }, true);
}

}  // namespace qfx::runtime
