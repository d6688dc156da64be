// Reference kernels: ReduceMax, ReduceMin, ReduceProd (float32, int64, int32; Max and
// Min also bool) and ArgMax / ArgMin (float32, int64, int32 -> int64), as the ONNX
// operator spec defines them (onnx.ai/onnx/operators; axes as attribute or, from opset
// 18, input; keepdims; noop_with_empty_axes; select_last_index).
#include <type_traits>

#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;
using Run = decltype(Kernel::run);

// ReduceMax / ReduceMin propagate NaN (as PyTorch's amax / amin); an empty reduction
// gives the identity (the lowest / highest value, 1 for a product), as opset 18 says.
template <typename T>
Run reduce_run(const std::string& op, const Shape& x, const Shape& kept) {
  const int which = op == "ReduceMax" ? 0 : op == "ReduceMin" ? 1 : 2;
  T init = 1;
  if (which == 0) init = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  if (which == 1) init = std::is_floating_point_v<T> ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  return [x, kept, which, init](const In& i, const Out& o) {
    const T* xp = i[0]->data<T>();
    T* y = o[0]->data<T>();
    std::fill(y, y + numel(kept), init);
    for_each_broadcast(x, x, kept, [&](int64_t p, int64_t, int64_t r) {
      const T v = xp[p], acc = y[r];
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(acc)) return;
        if (std::isnan(v)) {
          y[r] = v;
          return;
        }
      }
      if (which == 0) y[r] = acc < v ? v : acc;
      else if (which == 1) y[r] = v < acc ? v : acc;
      else if constexpr (std::is_integral_v<T>)  // wraps as two's complement
        y[r] = static_cast<T>(static_cast<std::make_unsigned_t<T>>(acc) * static_cast<std::make_unsigned_t<T>>(v));
      else y[r] = acc * v;
    });
  };
}

Kernel reduce(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  if (n.op == "ReduceProd") check_dtype(n, in[0].dtype, {DType::kFloat32, DType::kInt64, DType::kInt32});
  else check_dtype(n, in[0].dtype, {DType::kFloat32, DType::kInt64, DType::kInt32, DType::kBool});
  const Shape x = in[0].shape;
  const Reduction rd = reduction(n, x, consts);
  Kernel k;
  k.outputs = {{rd.out, in[0].dtype}};
  k.run = visit_dtype(in[0].dtype, [&](auto t) { return reduce_run<decltype(t)>(n.op, x, rd.kept); });
  return k;
}

// ArgMax / ArgMin along `axis`: the first extreme (the last with select_last_index);
// a NaN counts as the extreme (numpy and PyTorch).
template <typename T>
Run arg_run(AxisSplit s, bool is_max, bool last) {
  return [s, is_max, last](const In& i, const Out& o) {
    const T* x = i[0]->data<T>();
    int64_t* y = o[0]->data<int64_t>();
    for (int64_t a = 0; a < s.outer; ++a)
      for (int64_t b = 0; b < s.inner; ++b) {
        const T* row = x + a * s.dim * s.inner + b;
        int64_t best = 0;
        for (int64_t j = 1; j < s.dim; ++j) {
          const T v = row[j * s.inner], c = row[best * s.inner];
          bool better = is_max ? c < v : v < c;
          bool tie = v == c;
          if constexpr (std::is_floating_point_v<T>) {
            better = better || (std::isnan(v) && !std::isnan(c));
            tie = tie || (std::isnan(v) && std::isnan(c));
            if (std::isnan(c) && !std::isnan(v)) better = tie = false;
          }
          if (better || (last && tie)) best = j;
        }
        y[a * s.inner + b] = best;
      }
  };
}

Kernel arg_extreme(const Node& n, const std::vector<Meta>& in) {
  check_dtype(n, in[0].dtype, {DType::kFloat32, DType::kInt64, DType::kInt32});
  const Shape& x = in[0].shape;
  const int64_t axis = norm_axis(n, n.attr_i("axis", 0), x.size());
  const AxisSplit s = split_at(x, axis);
  if (s.dim == 0) bad_shape(n, "reduces an empty dimension (axis " + std::to_string(axis) + " of " + shape_str(x) + ")");
  Shape out = x;
  if (n.attr_i("keepdims", 1) != 0) out[static_cast<size_t>(axis)] = 1;
  else out.erase(out.begin() + axis);
  Kernel k;
  k.outputs = {{out, DType::kInt64}};
  const bool is_max = n.op == "ArgMax", last = n.attr_i("select_last_index", 0) != 0;
  k.run = visit_dtype(in[0].dtype, [&](auto t) { return arg_run<decltype(t)>(s, is_max, last); });
  return k;
}

}  // namespace

void register_reference_reduce() {
  add_reference({"ReduceMax", "ReduceMin", "ReduceProd"}, reduce);
  add_reference({"ArgMax", "ArgMin"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) {
    return arg_extreme(n, in);
  });
}

}  // namespace qfx::runtime
