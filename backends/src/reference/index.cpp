// Reference kernels that gather or scatter by index tensors, as the ONNX operator spec
// defines them (onnx.ai/onnx/operators): GatherElements, GatherND (batch_dims 0),
// ScatterElements and ScatterND (reduction none, add, and from opset 18 max and min).
// Data of any dtype (add, max, min: float32, int64, int32); int64 or int32 indices,
// negative ones counting from the end; an index out of range is a DataError naming the node.
#include <type_traits>

#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;
using Run = decltype(Kernel::run);

void check_indices(const Node& n, const Meta& m) {
  check_dtype(n, m.dtype, {DType::kInt64, DType::kInt32}, "the indices input");
}

// Index j of an int64 / int32 index tensor, checked against `dim` and made non-negative.
int64_t index_at(const Tensor& t, int64_t j, int64_t dim, const std::string& label) {
  int64_t v = t.dtype() == DType::kInt64 ? t.data<int64_t>()[j] : t.data<int32_t>()[j];
  if (v < -dim || v >= dim)
    throw DataError(label + ": index " + std::to_string(v) + " out of range for a dimension of " + std::to_string(dim));
  return v < 0 ? v + dim : v;
}

// How an update lands: copied (reduction none), added, or the larger / smaller kept.
enum class Land { kCopy, kAdd, kMax, kMin };

template <typename T>
void land(T* dst, const T* src, int64_t count, Land how) {
  for (int64_t e = 0; e < count; ++e) {
    if (how == Land::kCopy) dst[e] = src[e];
    else if (how == Land::kMax) dst[e] = src[e] > dst[e] ? src[e] : dst[e];
    else if (how == Land::kMin) dst[e] = src[e] < dst[e] ? src[e] : dst[e];
    else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)  // two's complement wrap-around
      dst[e] = static_cast<T>(static_cast<std::make_unsigned_t<T>>(dst[e]) + static_cast<std::make_unsigned_t<T>>(src[e]));
    else dst[e] = static_cast<T>(dst[e] + src[e]);
  }
}

Land scatter_reduction(const Node& n, const Meta& data) {
  const std::string r = n.attr_s("reduction", "none");
  if (r == "none") return Land::kCopy;
  if (r != "add" && r != "max" && r != "min") unsupported(n, "reduction '" + r + "' (none, add, max and min are supported)");
  check_dtype(n, data.dtype, {DType::kFloat32, DType::kInt64, DType::kInt32}, "data with a reduction");
  return r == "add" ? Land::kAdd : r == "max" ? Land::kMax : Land::kMin;
}

// GatherElements (scatter = false) / ScatterElements: for each position of the
// indices, the data element at that position with the axis coordinate replaced by
// the index (ONNX opset 13 / 16-18).
template <typename T>
Run elements_run(const Shape& data, const Shape& ind, int64_t axis, bool scatter, Land add, const std::string& label) {
  return [=](const In& i, const Out& o) {
    const Index ds = strides_of(data);
    const int64_t total = numel(ind);
    T* out = o[0]->data<T>();
    if (scatter) std::memcpy(out, i[0]->raw(), i[0]->nbytes());
    const Tensor& idx_t = *i[1];
    const T* src = i[scatter ? 2 : 0]->template data<T>();
    Index idx{};
    for (int64_t p = 0; p < total; ++p) {
      int64_t off = 0;
      for (size_t d = 0; d < ind.size(); ++d)
        off += (static_cast<int64_t>(d) == axis ? index_at(idx_t, p, data[d], label) : idx[d]) * ds[d];
      if (scatter) land(out + off, src + p, 1, add);
      else out[p] = src[off];
      for (size_t d = ind.size(); d-- > 0;) {
        if (++idx[d] < ind[d]) break;
        idx[d] = 0;
      }
    }
  };
}

Kernel elements(const Node& n, const std::vector<Meta>& in) {
  const bool scatter = n.op == "ScatterElements";
  const Shape& data = in[0].shape;
  const Shape& ind = in[1].shape;
  check_indices(n, in[1]);
  if (data.empty() || ind.size() != data.size()) bad_shape(n, "data " + shape_str(data) + " and indices " + shape_str(ind) + " must have one rank >= 1");
  const int64_t axis = norm_axis(n, n.attr_i("axis", 0), data.size());
  for (size_t d = 0; d < data.size(); ++d)
    if (static_cast<int64_t>(d) != axis && ind[d] > data[d]) bad_shape(n, "indices " + shape_str(ind) + " exceed data " + shape_str(data));
  if (scatter && in[2].shape != ind) bad_shape(n, "updates " + shape_str(in[2].shape) + " must have the shape of the indices " + shape_str(ind));
  if (scatter && in[2].dtype != in[0].dtype) bad_shape(n, "updates and data differ in dtype");
  const Land add = scatter ? scatter_reduction(n, in[0]) : Land::kCopy;
  Kernel k;
  k.outputs = {{scatter ? data : ind, in[0].dtype}};
  const std::string label = n.label();
  k.run = visit_dtype(in[0].dtype, [&](auto t) { return elements_run<decltype(t)>(data, ind, axis, scatter, add, label); });
  return k;
}

// GatherND / ScatterND (batch_dims 0): indices [..., q] address slices data[i0, .., iq-1]
// of data.shape[q:] elements.
template <typename T>
Run nd_run(const Shape& data, int64_t tuples, int64_t q, int64_t slice, bool scatter, Land add, const std::string& label) {
  return [=](const In& i, const Out& o) {
    const Index ds = strides_of(data);
    T* out = o[0]->data<T>();
    if (scatter) std::memcpy(out, i[0]->raw(), i[0]->nbytes());
    const T* src = i[scatter ? 2 : 0]->template data<T>();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = 0;
      for (int64_t d = 0; d < q; ++d) off += index_at(*i[1], t * q + d, data[static_cast<size_t>(d)], label) * ds[static_cast<size_t>(d)];
      if (scatter) land(out + off, src + t * slice, slice, add);
      else std::memcpy(out + t * slice, src + off, static_cast<size_t>(slice) * sizeof(T));
    }
  };
}

Kernel nd(const Node& n, const std::vector<Meta>& in) {
  const bool scatter = n.op == "ScatterND";
  if (n.attr_i("batch_dims", 0) != 0) unsupported(n, "batch_dims " + std::to_string(n.attr_i("batch_dims", 0)) + " (batch_dims 0 only)");
  const Shape& data = in[0].shape;
  const Shape& ind = in[1].shape;
  check_indices(n, in[1]);
  if (data.empty() || ind.empty()) bad_shape(n, "data and indices need rank >= 1");
  const int64_t q = ind.back();
  if (q < 1 || q > static_cast<int64_t>(data.size())) bad_shape(n, "indices' last dim " + std::to_string(q) + " outside 1.." + std::to_string(data.size()));
  Shape out(ind.begin(), ind.end() - 1);
  out.insert(out.end(), data.begin() + q, data.end());
  if (scatter && in[2].shape != out) bad_shape(n, "updates " + shape_str(in[2].shape) + ", expected " + shape_str(out));
  if (scatter && in[2].dtype != in[0].dtype) bad_shape(n, "updates and data differ in dtype");
  const Land add = scatter ? scatter_reduction(n, in[0]) : Land::kCopy;
  const int64_t tuples = numel(Shape(ind.begin(), ind.end() - 1)), slice = inner_numel(data, static_cast<size_t>(q));
  Kernel k;
  k.outputs = {{scatter ? data : out, in[0].dtype}};
  const std::string label = n.label();
  k.run = visit_dtype(in[0].dtype, [&](auto t) { return nd_run<decltype(t)>(data, tuples, q, slice, scatter, add, label); });
  return k;
}

}  // namespace

void register_reference_index() {
  const auto no_consts = [](auto fn) {
    return [fn](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return fn(n, in); };
  };
  add_reference({"GatherElements", "ScatterElements"}, no_consts(elements));
  add_reference({"GatherND", "ScatterND"}, no_consts(nd));
}

}  // namespace qfx::runtime
