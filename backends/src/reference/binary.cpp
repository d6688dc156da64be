// Reference kernels: broadcasting binary arithmetic as the ONNX operator spec defines it
// (onnx.ai/onnx/operators): Add, Sub, Mul, Div, Pow on float32 (Add with a fused Relu /
// Clip), int64 and int32; Mod (fmod 0: the sign of the divisor, as Python's %; fmod 1:
// C's fmod, required for float); variadic Min / Max; BitwiseAnd / BitwiseOr /
// BitwiseXor / BitwiseNot (opset 18). Integer results wrap around as two's complement.
#include <type_traits>

#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;
using Run = decltype(Kernel::run);

// Two's complement arithmetic, computed unsigned (no undefined signed overflow).
template <typename T>
T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T>
T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <typename T>
T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

// Integer Div truncates toward zero (ONNX Div, C++ /); min / -1 wraps to min.
template <typename T>
T int_div(T a, T b, const std::string& label) {
  if (b == 0) throw DataError(label + ": integer division by zero");
  return b == -1 ? wrap_sub(T{0}, a) : static_cast<T>(a / b);
}

// Integer Pow: exact repeated squaring (wrapping); a negative exponent truncates
// 1 / base^-e toward zero (1 and -1 stay +-1), and 0 to a negative power is an error.
template <typename T>
T int_pow(T base, int64_t e, const std::string& label) {
  if (e < 0) {
    if (base == 0) throw DataError(label + ": integer 0 to a negative power");
    return base == 1 ? T{1} : base == -1 ? static_cast<T>(e % 2 ? -1 : 1) : T{0};
  }
  T r = 1;
  for (; e > 0; e >>= 1, base = wrap_mul(base, base))
    if (e & 1) r = wrap_mul(r, base);
  return r;
}

// Integer Mod: fmod 0 takes the divisor's sign (Python), fmod 1 the dividend's (C).
template <typename T>
T int_mod(T a, T b, bool fmod, const std::string& label) {
  if (b == 0) throw DataError(label + ": integer Mod by zero");
  if (b == -1) return 0;  // min % -1 would overflow
  T r = static_cast<T>(a % b);
  if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
  return r;
}

// z[p] = f(x[q], y[r]) over the numpy broadcast of a and b; x of type T, y of type E.
template <typename T, typename E = T, typename R = T, typename F>
Run broadcast_run(const Shape& o, const Shape& a, const Shape& b, F f) {
  return [o, a, b, f](const In& i, const Out& out) {
    const T* x = i[0]->data<T>();
    const E* y = i[1]->data<E>();
    R* z = out[0]->data<R>();
    for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = f(x[q], y[r]); });
  };
}

Run float_arith(const Node& n, const Shape& o, const Shape& a, const Shape& b) {
  const std::string& op = n.op;
  const float lo = n.act_bounds().first, hi = n.act_bounds().second;
  if (op == "Add") return broadcast_run<float>(o, a, b, [lo, hi](float x, float y) { return std::min(std::max(x + y, lo), hi); });
  if (op == "Sub") return broadcast_run<float>(o, a, b, [](float x, float y) { return x - y; });
  if (op == "Mul") return broadcast_run<float>(o, a, b, [](float x, float y) { return x * y; });
  if (op == "Div") return broadcast_run<float>(o, a, b, [](float x, float y) { return x / y; });
  if (op == "Pow") return broadcast_run<float>(o, a, b, [](float x, float y) { return std::pow(x, y); });
  if (n.attr_i("fmod", 0) == 0) unsupported(n, "fmod 0 on float32 (the ONNX spec requires fmod 1 for floating point)");
  return broadcast_run<float>(o, a, b, [](float x, float y) { return std::fmod(x, y); });
}

template <typename T>
Run int_arith(const Node& n, const Shape& o, const Shape& a, const Shape& b) {
  const std::string& op = n.op;
  const std::string label = n.label();
  if (op == "Add") return broadcast_run<T>(o, a, b, [](T x, T y) { return wrap_add(x, y); });
  if (op == "Sub") return broadcast_run<T>(o, a, b, [](T x, T y) { return wrap_sub(x, y); });
  if (op == "Mul") return broadcast_run<T>(o, a, b, [](T x, T y) { return wrap_mul(x, y); });
  if (op == "Div") return broadcast_run<T>(o, a, b, [label](T x, T y) { return int_div(x, y, label); });
  if (op == "Pow") return broadcast_run<T>(o, a, b, [label](T x, T y) { return int_pow(x, static_cast<int64_t>(y), label); });
  const bool fmod = n.attr_i("fmod", 0) != 0;
  return broadcast_run<T>(o, a, b, [label, fmod](T x, T y) { return int_mod(x, y, fmod, label); });
}

// Add, Sub, Mul, Div, Pow, Mod: both inputs one dtype (float32, int64, int32); Pow
// also float32 to an int64 / int32 exponent.
Kernel arith(const Node& n, const std::vector<Meta>& in) {
  const Shape o = broadcast(n, in[0].shape, in[1].shape), a = in[0].shape, b = in[1].shape;
  const DType dt = in[0].dtype;
  check_dtype(n, dt, {DType::kFloat32, DType::kInt64, DType::kInt32});
  if (dt != DType::kFloat32 && !n.fused_act.empty()) unsupported(n, "a fused activation on integers");
  Kernel k;
  k.outputs = {{o, dt}};
  if (n.op == "Pow" && dt == DType::kFloat32 && in[1].dtype != DType::kFloat32) {
    check_dtype(n, in[1].dtype, {DType::kInt64, DType::kInt32}, "the exponent");
    k.run = in[1].dtype == DType::kInt64
                ? broadcast_run<float, int64_t>(o, a, b, [](float x, int64_t y) { return std::pow(x, static_cast<float>(y)); })
                : broadcast_run<float, int32_t>(o, a, b, [](float x, int32_t y) { return std::pow(x, static_cast<float>(y)); });
    return k;
  }
  if (n.op == "Pow" && dt != DType::kFloat32 && in[1].dtype != dt) unsupported(n, "an integer base to an exponent of another dtype");
  check_same_dtype(n, in);
  if (dt == DType::kFloat32) k.run = float_arith(n, o, a, b);
  else if (dt == DType::kInt64) k.run = int_arith<int64_t>(n, o, a, b);
  else k.run = int_arith<int32_t>(n, o, a, b);
  return k;
}

// Min / Max of one or more inputs, numpy broadcast; a NaN operand gives NaN (as
// PyTorch's minimum / maximum).
template <typename T>
Run min_max_run(const std::vector<Meta>& in, const Shape& o, bool is_max) {
  std::vector<Shape> shapes;
  for (const auto& m : in) shapes.push_back(m.shape);
  return [shapes, o, is_max](const In& i, const Out& out) {
    T* z = out[0]->data<T>();
    const T* x0 = i[0]->data<T>();
    for_each_broadcast(o, shapes[0], o, [&](int64_t p, int64_t q, int64_t) { z[p] = x0[q]; });
    for (size_t t = 1; t < shapes.size(); ++t) {
      const T* x = i[t]->data<T>();
      for_each_broadcast(o, o, shapes[t], [&](int64_t p, int64_t, int64_t r) {
        const T u = z[p], v = x[r];
        if constexpr (std::is_floating_point_v<T>)
          if (std::isnan(u) || std::isnan(v)) {
            z[p] = std::numeric_limits<T>::quiet_NaN();
            return;
          }
        z[p] = is_max ? (u < v ? v : u) : (v < u ? v : u);
      });
    }
  };
}

Kernel min_max(const Node& n, const std::vector<Meta>& in) {
  check_dtype(n, in[0].dtype, {DType::kFloat32, DType::kInt64, DType::kInt32});
  check_same_dtype(n, in);
  Shape o = in[0].shape;
  for (size_t t = 1; t < in.size(); ++t) o = broadcast(n, o, in[t].shape);
  Kernel k;
  k.outputs = {{o, in[0].dtype}};
  const bool is_max = n.op == "Max";
  k.run = visit_dtype(in[0].dtype, [&](auto t) { return min_max_run<decltype(t)>(in, o, is_max); });
  return k;
}

template <typename T>
Run bitwise_run(const std::string& op, const Shape& o, const Shape& a, const Shape& b) {
  if (op == "BitwiseAnd") return broadcast_run<T>(o, a, b, [](T x, T y) { return static_cast<T>(x & y); });
  if (op == "BitwiseOr") return broadcast_run<T>(o, a, b, [](T x, T y) { return static_cast<T>(x | y); });
  if (op == "BitwiseXor") return broadcast_run<T>(o, a, b, [](T x, T y) { return static_cast<T>(x ^ y); });
  return [](const In& i, const Out& out) {  // BitwiseNot
    const T* x = i[0]->data<T>();
    T* z = out[0]->data<T>();
    for (int64_t p = 0; p < i[0]->numel(); ++p) z[p] = static_cast<T>(~x[p]);
  };
}

// BitwiseAnd / Or / Xor / Not (opset 18) on int64, int32, int16, int8, uint8.
Kernel bitwise(const Node& n, const std::vector<Meta>& in) {
  check_dtype(n, in[0].dtype, {DType::kInt64, DType::kInt32, DType::kInt16, DType::kInt8, DType::kUInt8});
  const bool is_not = n.op == "BitwiseNot";
  if (!is_not) check_same_dtype(n, in);
  const Shape a = in[0].shape, b = is_not ? a : in[1].shape, o = is_not ? a : broadcast(n, a, b);
  Kernel k;
  k.outputs = {{o, in[0].dtype}};
  k.run = visit_dtype(in[0].dtype, [&](auto t) -> Run {
    if constexpr (std::is_integral_v<decltype(t)>) return bitwise_run<decltype(t)>(n.op, o, a, b);
    return nullptr;  // not reached: integer dtypes only
  });
  return k;
}

}  // namespace

void register_reference_binary() {
  const auto no_consts = [](auto fn) {
    return [fn](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return fn(n, in); };
  };
  add_reference({"Add", "Sub", "Mul", "Div", "Pow", "Mod"}, no_consts(arith));
  add_reference({"Min", "Max"}, no_consts(min_max));
  add_reference({"BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"}, no_consts(bitwise));
}

}  // namespace qfx::runtime
