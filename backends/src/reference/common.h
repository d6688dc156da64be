// Internal: helpers shared by the reference kernels (shapes, broadcasting, window
// geometry, int8 ranges) and their registration wrapper.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "../kernels.h"
#include "qfx/error.h"

namespace qfx::runtime::ref {

using ir::Node;
using In = std::vector<const Tensor*>;
using Out = std::vector<Tensor*>;

[[noreturn]] inline void unsupported(const Node& n, const std::string& why) {
  throw UnsupportedOpError(n.label() + ": " + why);
}

inline std::string shape_str(const Shape& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

[[noreturn]] inline void bad_shape(const Node& n, const std::string& why) {
  throw DataError(n.label() + ": " + why);
}

inline int64_t numel(const Shape& s) {
  int64_t p = 1;
  for (auto d : s) p *= d;
  return p;
}

/// The product of dims [from, rank): the inner size, without dividing numel by
/// the outer dims (a batch of 0 would divide by zero).
inline int64_t inner_numel(const Shape& s, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < s.size(); ++i) p *= s[i];
  return p;
}

inline int64_t norm_axis(const Node& n, int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) bad_shape(n, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
  return axis < 0 ? axis + r : axis;
}

inline const Tensor& need_const(const Node& n, const std::vector<const Tensor*>& consts, size_t i, const char* what) {
  if (i >= consts.size() || !consts[i])
    unsupported(n, std::string(what) + " must be a constant (initializer); computed " + what + " is not supported");
  return *consts[i];
}

/// `need_const` that also checks the constant's dtype and, if `count` >= 0, its
/// element count: a typed read of a constant never runs past its data.
inline const Tensor& need_const(const Node& n, const std::vector<const Tensor*>& consts, size_t i, const char* what,
                                DType dtype, int64_t count = -1) {
  const Tensor& t = need_const(n, consts, i, what);
  if (t.dtype() != dtype)
    bad_shape(n, std::string(what) + " is " + dtype_name(t.dtype()) + ", expected " + dtype_name(dtype));
  if (count >= 0 && t.numel() != count)
    bad_shape(n, std::string(what) + " has " + std::to_string(t.numel()) + " elements, expected " + std::to_string(count));
  return t;
}

/// Per-channel qparams `q` of node `n` hold one value or `channels` values.
inline void check_channels(const Node& n, const ir::QInfo& q, int64_t channels, const char* what) {
  if (q.scale.empty() || (q.scale.size() != 1 && static_cast<int64_t>(q.scale.size()) != channels) ||
      q.zero_point.size() != q.scale.size())
    bad_shape(n, std::string(what) + " has " + std::to_string(q.scale.size()) + " scales and " +
                     std::to_string(q.zero_point.size()) + " zero points for " + std::to_string(channels) + " channels");
}

/// Input `i` of `n` as a value known when the model is planned: an initializer, or a
/// value the planner folded (shape arithmetic on the input shapes, as Shape -> Gather
/// -> Range). Ops whose output shape depends on the value (Range, Tile, TopK's K,
/// Split's sizes, ConstantOfShape) read their shape inputs with it. Throws
/// UnsupportedOpError naming the node for a value computed from the model's data.
inline const Tensor& need_known(const Node& n, const std::vector<const Tensor*>& consts, size_t i, const char* what) {
  if (i >= consts.size() || !consts[i])
    unsupported(n, std::string(what) + " must be known when the model is planned (an initializer, or shape arithmetic on "
                "the input shapes): it decides the output shape, and here it is computed from the model's data");
  return *consts[i];
}

/// True when optional input `i` of `n` is given (present and not the empty name).
inline bool has_input(const Node& n, size_t i) { return i < n.inputs.size() && !n.inputs[i].empty(); }

/// Calls `f(T{})` with T the C++ element type of `d` (bool as uint8_t, 0 or 1).
template <typename F>
decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::kFloat32: return f(float{});
    case DType::kInt64: return f(int64_t{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt16: return f(int16_t{});
    case DType::kInt8: return f(int8_t{});
    default: return f(uint8_t{});  // kUInt8, kBool
  }
}

/// Throws UnsupportedOpError naming `n` unless `d` is one of `allowed`.
inline void check_dtype(const Node& n, DType d, std::initializer_list<DType> allowed, const char* what = "input") {
  for (DType a : allowed)
    if (a == d) return;
  std::string names;
  for (DType a : allowed) names += std::string(names.empty() ? "" : ", ") + dtype_name(a);
  unsupported(n, std::string(what) + " is " + dtype_name(d) + "; " + n.op + " takes " + names);
}

/// Throws UnsupportedOpError naming `n` unless inputs `from`.. all have input `from`'s dtype.
inline void check_same_dtype(const Node& n, const std::vector<Meta>& in, size_t from = 0) {
  for (size_t i = from + 1; i < in.size(); ++i)
    if (in[i].dtype != in[from].dtype)
      unsupported(n, std::string("inputs of different dtypes (") + dtype_name(in[from].dtype) + " and " + dtype_name(in[i].dtype) +
                         "); ONNX " + n.op + " takes one dtype");
}

inline std::vector<int64_t> int_values(const Tensor& t) {
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32)
    throw DataError("expected an int64 or int32 constant, got " + t.describe());
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.dtype() == DType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
  return v;
}

inline float float_value(const Tensor& t) { return static_cast<float>(t.scalar()); }

// Index arithmetic uses fixed-size arrays, so running a kernel allocates nothing.
constexpr size_t kMaxRank = 8;
using Index = std::array<int64_t, kMaxRank>;

/// Row-major element strides of `s`.
inline Index strides_of(const Shape& s) {
  Index st{};
  int64_t acc = 1;
  for (size_t d = s.size(); d-- > 0;) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

/// Refuses (UnsupportedOpError) a one-input integer node `n` whose input `x` or output
/// is not 8-bit or whose qparams are not per tensor.
inline void check_8bit(const Node& n, const Meta& x) {
  if (x.dtype != DType::kUInt8 && x.dtype != DType::kInt8) unsupported(n, n.op + " needs an 8-bit input");
  if (n.in_q.empty() || n.in_q[0].scale.size() != 1 || n.out_q.scale.size() != 1)
    unsupported(n, n.op + " needs per-tensor input and output qparams");
  if (n.out_q.dtype != DType::kUInt8 && n.out_q.dtype != DType::kInt8) unsupported(n, n.op + " needs an 8-bit output");
}

/// The (outer, dim, inner) split of `s` around `axis`: `s` seen as [outer, dim, inner].
struct AxisSplit {
  int64_t outer, dim, inner;
};
inline AxisSplit split_at(const Shape& s, int64_t axis) {
  return {numel(Shape(s.begin(), s.begin() + axis)), s[static_cast<size_t>(axis)], inner_numel(s, static_cast<size_t>(axis) + 1)};
}

// --- broadcasting elementwise -------------------------------------------------

inline Shape broadcast(const Node& n, const Shape& a, const Shape& b) {
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
inline Index bstrides(const Shape& s, const Shape& o) {
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

// --- reductions ---------------------------------------------------------------------

/// What a Reduce* node reduces (ONNX ReduceMean / ReduceSum / ReduceMax / ...): axes
/// from the `axes` attribute (before opset 18; ReduceSum from 13) or input 1 (a value
/// known at plan time); none: every axis, or nothing with noop_with_empty_axes.
struct Reduction {
  Shape out;   ///< the output shape (keepdims: reduced dims as 1; else dropped)
  Shape kept;  ///< the input shape with the reduced dims as 1
  bool noop = false;  ///< empty axes with noop_with_empty_axes: the output is the input
};
/// Throws DataError naming `n` for an axis outside the input's rank.
Reduction reduction(const Node& n, const Shape& x, const std::vector<const Tensor*>& consts);

// --- conv / pool geometry --------------------------------------------------------

struct Geom {
  int64_t N, C, H, W, M, kH, kW, oH, oW, sH, sW, dH, dW, pT, pL, pB, pR, group;
};


// Spatial geometry of a 1-D or 2-D window op on input [N, C, (H,) W]. Throws
// UnsupportedOpError / DataError naming the node for geometry it cannot run.
Geom window_geom(const Node& n, const Shape& x, std::vector<int64_t> kernel, bool ceil_mode = false);

// Channels and elements per channel slice of `x` for (per-channel) QuantizeLinear /
// DequantizeLinear qparams `q`. Throws DataError naming `n` when the scales do not
// match the channels along the axis.
void channel_layout(const Node& n, const ir::QInfo& q, const Shape& x, int64_t* channels, int64_t* inner);

// Geometry of a convolution with weight shape `w` ([M, C/group, k...]): window_geom
// plus group and M; throws DataError naming the node when weight, group and input
// channels do not fit.
Geom conv_geom(const Node& n, const std::vector<Meta>& in, const Shape& w);

inline Shape spatial_out(const Shape& x, int64_t C, const Geom& g) {
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

// --- int8 helpers -------------------------------------------------------------------

struct QRange {
  int32_t lo, hi;
};
inline QRange qrange(DType d) {
  return d == DType::kUInt8 ? QRange{0, 255} : d == DType::kInt16 ? QRange{-32768, 32767} : QRange{-128, 127};
}

// Output clamp of a fused activation, in the output's integer domain.
inline QRange act_range(const Node& n) {
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

// Reads element i of an int8/uint8/int16 tensor as int32.
inline int32_t qload(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kUInt8 ? t.data<uint8_t>()[i] : t.dtype() == DType::kInt16 ? t.data<int16_t>()[i] : t.data<int8_t>()[i];
}

// Writes code v (already in range) as element i of a uint8/int8/int16 buffer.
inline void store_code(DType d, void* dst, int64_t i, int32_t v) {
  if (d == DType::kUInt8) static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(v);
  else if (d == DType::kInt16) static_cast<int16_t*>(dst)[i] = static_cast<int16_t>(v);
  else static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(v);
}

inline float per(const std::vector<float>& v, int64_t i) { return v.size() == 1 ? v[0] : v[static_cast<size_t>(i)]; }
inline int32_t per(const std::vector<int32_t>& v, int64_t i) { return v.size() == 1 ? v[0] : v[static_cast<size_t>(i)]; }

/// A reference kernel builder: builds the kernel or throws for an invalid node.
using RefBuilder = std::function<Kernel(const Node&, const std::vector<Meta>&, const std::vector<const Tensor*>&)>;
/// Registers `build` as the "reference" implementation of each op in `ops`
/// (after the checks every reference kernel shares: rank <= kMaxRank, an input).
/// `elementwise`: the kernel indexes its inputs and output flat, so inputs of one
/// shape all stored channels last run as they are and the output stays channels
/// last (when the planner allows it), sparing two layout conversions.
void add_reference(const std::vector<std::string>& ops, RefBuilder build, bool elementwise = false);

}  // namespace qfx::runtime::ref
