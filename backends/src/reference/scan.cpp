// Reference kernels along one axis, as the ONNX operator spec defines them
// (onnx.ai/onnx/operators): CumSum (exclusive, reverse; float32, int64, int32) and
// TopK (largest, sorted; values and int64 indices; float32, int64, int32).
#include <memory>
#include <type_traits>

#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;
using Run = decltype(Kernel::run);

// The CumSum axis: a 0-d or one-element int64 / int32 tensor.
int64_t cumsum_axis(const std::string& label, const Tensor& t, size_t rank) {
  if ((t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32) || t.numel() != 1)
    throw DataError(label + ": the axis must be one int64 or int32 value, got " + t.describe());
  const int64_t a = t.dtype() == DType::kInt64 ? t.data<int64_t>()[0] : t.data<int32_t>()[0];
  const int64_t r = static_cast<int64_t>(rank);
  if (a < -r || a >= r) throw DataError(label + ": axis " + std::to_string(a) + " out of range for rank " + std::to_string(r));
  return a < 0 ? a + r : a;
}

template <typename T>
struct Same {
  using type = T;
};

// Running sums along the axis (integers wrap as two's complement).
template <typename T>
void cumsum_loops(const T* x, T* y, AxisSplit s, bool exclusive, bool reverse) {
  using Acc = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>, Same<T>>::type;
  for (int64_t a = 0; a < s.outer; ++a)
    for (int64_t b = 0; b < s.inner; ++b) {
      Acc acc = 0;
      for (int64_t jj = 0; jj < s.dim; ++jj) {
        const int64_t p = (a * s.dim + (reverse ? s.dim - 1 - jj : jj)) * s.inner + b;
        if (exclusive) y[p] = static_cast<T>(acc);
        acc = static_cast<Acc>(acc + static_cast<Acc>(x[p]));
        if (!exclusive) y[p] = static_cast<T>(acc);
      }
    }
}

// CumSum(x, axis): the axis may be computed (the output shape does not depend on it).
Kernel cumsum(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  check_dtype(n, in[0].dtype, {DType::kFloat32, DType::kInt64, DType::kInt32});
  const Shape x = in[0].shape;
  if (x.empty()) bad_shape(n, "input of rank 0");
  const bool exclusive = n.attr_i("exclusive", 0) != 0, reverse = n.attr_i("reverse", 0) != 0;
  const std::string label = n.label();
  const int64_t fixed = consts.size() > 1 && consts[1] ? cumsum_axis(label, *consts[1], x.size()) : -1;
  Kernel k;
  k.outputs = {{x, in[0].dtype}};
  const DType dt = in[0].dtype;
  k.run = [=](const In& i, const Out& o) {
    const int64_t axis = fixed >= 0 ? fixed : cumsum_axis(label, *i[1], x.size());
    visit_dtype(dt, [&](auto t) {
      using T = decltype(t);
      cumsum_loops(i[0]->data<T>(), o[0]->data<T>(), split_at(x, axis), exclusive, reverse);
    });
  };
  return k;
}

// TopK along the axis: the k largest (smallest) in order, ties by the lower index,
// a NaN above every number (as PyTorch's topk); `order` is scratch of the axis' length.
template <typename T>
Run topk_run(AxisSplit s, int64_t kk, bool largest) {
  auto order = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(s.dim));
  return [s, kk, largest, order](const In& i, const Out& o) {
    const T* x = i[0]->data<T>();
    T* values = o[0] ? o[0]->data<T>() : nullptr;
    int64_t* indices = o[1] ? o[1]->data<int64_t>() : nullptr;
    auto key_above = [largest](T u, T v) {
      if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(u) || std::isnan(v)) return largest ? std::isnan(u) && !std::isnan(v) : std::isnan(v) && !std::isnan(u);
      return largest ? u > v : u < v;
    };
    for (int64_t a = 0; a < s.outer; ++a)
      for (int64_t b = 0; b < s.inner; ++b) {
        const T* row = x + a * s.dim * s.inner + b;
        std::iota(order->begin(), order->end(), int64_t{0});
        std::partial_sort(order->begin(), order->begin() + kk, order->end(), [&](int64_t p, int64_t q) {
          const T u = row[p * s.inner], v = row[q * s.inner];
          if (key_above(u, v)) return true;
          return !key_above(v, u) && p < q;
        });
        for (int64_t j = 0; j < kk; ++j) {
          const int64_t dst = (a * kk + j) * s.inner + b, src = (*order)[static_cast<size_t>(j)];
          if (values) values[dst] = row[src * s.inner];
          if (indices) indices[dst] = src;
        }
      }
  };
}

// TopK(X, K): K must be known at plan time (it sizes the outputs); sorted 0 (any
// order) is served sorted.
Kernel topk(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  check_dtype(n, in[0].dtype, {DType::kFloat32, DType::kInt64, DType::kInt32});
  const Shape& x = in[0].shape;
  if (x.empty()) bad_shape(n, "input of rank 0");
  const auto kv = int_values(need_known(n, consts, 1, "K"));
  if (kv.size() != 1) bad_shape(n, "K must hold one value, has " + std::to_string(kv.size()));
  const int64_t axis = norm_axis(n, n.attr_i("axis", -1), x.size());
  const AxisSplit s = split_at(x, axis);
  const int64_t kk = kv[0];
  if (kk < 0 || kk > s.dim) bad_shape(n, "K " + std::to_string(kk) + " outside 0.." + std::to_string(s.dim) + " (axis " +
                                             std::to_string(axis) + " of " + shape_str(x) + ")");
  Shape out = x;
  out[static_cast<size_t>(axis)] = kk;
  Kernel k;
  k.outputs = {{out, in[0].dtype}, {out, DType::kInt64}};
  const bool largest = n.attr_i("largest", 1) != 0;
  k.run = visit_dtype(in[0].dtype, [&](auto t) { return topk_run<decltype(t)>(s, kk, largest); });
  return k;
}

}  // namespace

void register_reference_scan() {
  add_reference({"CumSum"}, cumsum);
  add_reference({"TopK"}, topk);
}

}  // namespace qfx::runtime
