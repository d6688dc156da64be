// Reference kernels: Gather (an embedding lookup, index_select: any data dtype,
// int64 / int32 indices) and Cast between float32, int64, int32 and bool, as the
// ONNX operator spec defines them.
#include <map>
#include <type_traits>

#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

// Gather(data, indices, axis): out = data[..., indices[j...], ...] along `axis`,
// out's shape data[:axis] + indices + data[axis+1:]. Negative indices count from
// the end; an index out of range is a DataError naming the node.
Kernel gather(const Node& n, const std::vector<Meta>& in) {
  const Shape& x = in[0].shape;
  const Shape& ix = in[1].shape;
  if (in[1].dtype != DType::kInt64 && in[1].dtype != DType::kInt32)
    unsupported(n, std::string("indices are ") + dtype_name(in[1].dtype) + "; Gather takes int64 or int32 indices");
  if (x.empty()) bad_shape(n, "data of rank 0");
  const int64_t axis = norm_axis(n, n.attr_i("axis", 0), x.size());
  Shape out(x.begin(), x.begin() + axis);
  out.insert(out.end(), ix.begin(), ix.end());
  out.insert(out.end(), x.begin() + axis + 1, x.end());
  const int64_t outer = numel(Shape(x.begin(), x.begin() + axis)), inner = inner_numel(x, static_cast<size_t>(axis) + 1);
  const int64_t dim = x[static_cast<size_t>(axis)], count = numel(ix);
  const size_t row = static_cast<size_t>(inner) * dtype_size(in[0].dtype);
  const bool wide = in[1].dtype == DType::kInt64;
  const std::string label = n.label();
  Kernel k;
  k.outputs = {{out, in[0].dtype}};
  k.run = [=](const In& i, const Out& o) {
    const auto* src = static_cast<const uint8_t*>(i[0]->raw());
    auto* dst = static_cast<uint8_t*>(o[0]->raw());
    for (int64_t j = 0; j < count; ++j) {
      int64_t v = wide ? i[1]->data<int64_t>()[j] : i[1]->data<int32_t>()[j];
      if (v < -dim || v >= dim)
        throw DataError(label + ": index " + std::to_string(v) + " out of range for a dimension of " + std::to_string(dim));
      if (v < 0) v += dim;
      for (int64_t a = 0; a < outer; ++a)
        std::memcpy(dst + static_cast<size_t>(a * count + j) * row, src + static_cast<size_t>(a * dim + v) * row, row);
    }
  };
  return k;
}

template <typename From, typename To>
void convert(const Tensor& x, Tensor& y) {
  const From* s = static_cast<const From*>(x.raw());
  To* d = static_cast<To*>(y.raw());
  for (int64_t p = 0; p < x.numel(); ++p) {
    if constexpr (std::is_same_v<To, uint8_t>) d[p] = s[p] != From{0} ? 1 : 0;  // bool
    else d[p] = static_cast<To>(s[p]);
  }
}

template <typename From>
void convert_to(const Tensor& x, Tensor& y, DType to) {
  switch (to) {
    case DType::kFloat32: return convert<From, float>(x, y);
    case DType::kInt64: return convert<From, int64_t>(x, y);
    case DType::kInt32: return convert<From, int32_t>(x, y);
    default: return convert<From, uint8_t>(x, y);
  }
}

// Cast(input, to): float32 <-> int64 / int32 / bool (float to integer truncates
// toward zero, as C++ and ONNX Runtime do for values in range).
Kernel cast(const Node& n, const std::vector<Meta>& in) {
  const int64_t to_attr = n.attr_i("to", 0);
  const std::map<int64_t, DType> types = {{1, DType::kFloat32}, {7, DType::kInt64}, {6, DType::kInt32}, {9, DType::kBool}};
  auto t = types.find(to_attr);
  if (t == types.end()) unsupported(n, "Cast to ONNX type " + std::to_string(to_attr) + " (float, int64, int32 and bool only)");
  const DType from = in[0].dtype, to = t->second;
  if (from != DType::kFloat32 && from != DType::kInt64 && from != DType::kInt32 && from != DType::kBool)
    unsupported(n, std::string("Cast from ") + dtype_name(from));
  Kernel k;
  k.outputs = {{in[0].shape, to}};
  k.run = [from, to](const In& i, const Out& o) {
    switch (from) {
      case DType::kFloat32: return convert_to<float>(*i[0], *o[0], to);
      case DType::kInt64: return convert_to<int64_t>(*i[0], *o[0], to);
      case DType::kInt32: return convert_to<int32_t>(*i[0], *o[0], to);
      default: return convert_to<uint8_t>(*i[0], *o[0], to);
    }
  };
  return k;
}

}  // namespace

void register_reference_gather() {
  add_reference({"Gather"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return gather(n, in); });
  add_reference({"Cast"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return cast(n, in); });
}

}  // namespace qfx::runtime
