// Reference kernels: comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual ->
// bool) of float32, int64 or int32 tensors (Equal also bool), Not / And / Or / Xor on
// bool, Where(bool, X, Y) with X and Y of any one dtype, all broadcasting as ONNX
// (numpy) does (onnx.ai/onnx/operators).
#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;
using Run = decltype(Kernel::run);

template <typename T, typename F>
Run compare_run(const Shape& o, const Shape& a, const Shape& b, F f) {
  return [o, a, b, f](const In& i, const Out& out) {
    const T* x = i[0]->data<T>();
    const T* y = i[1]->data<T>();
    auto* z = static_cast<uint8_t*>(out[0]->raw());
    for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = f(x[q], y[r]) ? 1 : 0; });
  };
}

template <typename T>
Run compare_op(const std::string& op, const Shape& o, const Shape& a, const Shape& b) {
  if (op == "Equal") return compare_run<T>(o, a, b, [](T u, T v) { return u == v; });
  if (op == "Less") return compare_run<T>(o, a, b, [](T u, T v) { return u < v; });
  if (op == "Greater") return compare_run<T>(o, a, b, [](T u, T v) { return u > v; });
  if (op == "LessOrEqual") return compare_run<T>(o, a, b, [](T u, T v) { return u <= v; });
  return compare_run<T>(o, a, b, [](T u, T v) { return u >= v; });
}

Kernel compare(const Node& n, const std::vector<Meta>& in) {
  if (n.op == "Equal") check_dtype(n, in[0].dtype, {DType::kFloat32, DType::kInt64, DType::kInt32, DType::kBool});
  else check_dtype(n, in[0].dtype, {DType::kFloat32, DType::kInt64, DType::kInt32});
  check_same_dtype(n, in);
  const Shape o = broadcast(n, in[0].shape, in[1].shape), a = in[0].shape, b = in[1].shape;
  Kernel k;
  k.outputs = {{o, DType::kBool}};
  k.run = visit_dtype(in[0].dtype, [&](auto t) { return compare_op<decltype(t)>(n.op, o, a, b); });
  return k;
}

Kernel logic(const Node& n, const std::vector<Meta>& in) {
  for (const auto& m : in)
    if (m.dtype != DType::kBool) unsupported(n, "takes bool inputs");
  const bool is_not = n.op == "Not";
  const Shape o = is_not ? in[0].shape : broadcast(n, in[0].shape, in[1].shape), a = in[0].shape, b = is_not ? a : in[1].shape;
  Kernel k;
  k.outputs = {{o, DType::kBool}};
  if (is_not) {
    k.run = [](const In& i, const Out& out) {
      const auto* x = static_cast<const uint8_t*>(i[0]->raw());
      auto* z = static_cast<uint8_t*>(out[0]->raw());
      for (int64_t p = 0; p < i[0]->numel(); ++p) z[p] = x[p] ? 0 : 1;
    };
  } else if (n.op == "And") {
    k.run = compare_run<uint8_t>(o, a, b, [](uint8_t u, uint8_t v) { return u && v; });
  } else if (n.op == "Or") {
    k.run = compare_run<uint8_t>(o, a, b, [](uint8_t u, uint8_t v) { return u || v; });
  } else {
    k.run = compare_run<uint8_t>(o, a, b, [](uint8_t u, uint8_t v) { return (u != 0) != (v != 0); });
  }
  return k;
}

// Where over the broadcast shape `o`: values copied as the unsigned type T of their width.
template <typename T>
Run where_run(const Shape& o, const Index& sc, const Index& sa, const Index& sb) {
  return [o, sc, sa, sb](const In& i, const Out& out) {
    const auto* cond = static_cast<const uint8_t*>(i[0]->raw());
    const T* x = static_cast<const T*>(i[1]->raw());
    const T* y = static_cast<const T*>(i[2]->raw());
    T* z = static_cast<T*>(out[0]->raw());
    const int64_t total = numel(o);
    Index idx{};
    int64_t ic = 0, ia = 0, ib = 0;
    for (int64_t p = 0; p < total; ++p) {
      z[p] = cond[ic] ? x[ia] : y[ib];
      for (size_t d = o.size(); d-- > 0;) {
        ++idx[d];
        ic += sc[d];
        ia += sa[d];
        ib += sb[d];
        if (idx[d] < o[d]) break;
        ic -= sc[d] * o[d];
        ia -= sa[d] * o[d];
        ib -= sb[d] * o[d];
        idx[d] = 0;
      }
    }
  };
}

// Where(condition, X, Y): X where the condition holds, else Y, over the broadcast of
// all three; X and Y of one dtype (any).
Kernel where(const Node& n, const std::vector<Meta>& in) {
  if (in[0].dtype != DType::kBool) unsupported(n, std::string("the condition is ") + dtype_name(in[0].dtype) + "; Where takes bool");
  check_same_dtype(n, in, 1);
  const Shape o = broadcast(n, in[0].shape, broadcast(n, in[1].shape, in[2].shape));
  const Index sc = bstrides(in[0].shape, o), sa = bstrides(in[1].shape, o), sb = bstrides(in[2].shape, o);
  const DType dt = in[1].dtype;
  Kernel k;
  k.outputs = {{o, dt}};
  switch (dtype_size(dt)) {
    case 1: k.run = where_run<uint8_t>(o, sc, sa, sb); break;
    case 2: k.run = where_run<uint16_t>(o, sc, sa, sb); break;
    case 4: k.run = where_run<uint32_t>(o, sc, sa, sb); break;
    default: k.run = where_run<uint64_t>(o, sc, sa, sb); break;
  }
  return k;
}

}  // namespace

void register_reference_logic() {
  const auto no_consts = [](auto fn) {
    return [fn](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return fn(n, in); };
  };
  add_reference({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}, no_consts(compare));
  add_reference({"Not", "And", "Or", "Xor"}, no_consts(logic));
  add_reference({"Where"}, no_consts(where));
}

}  // namespace qfx::runtime
