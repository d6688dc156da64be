// Reference kernels: Gather (an embedding lookup, index_select: any data dtype,
// int64 / int32 indices) and Cast between float32, int64, int32, int16, int8, uint8
// and bool, as the ONNX operator spec defines them.
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

// One element cast as ONNX Cast defines it: to bool, x != 0; float to an integer,
// truncation toward zero (NaN gives 0, values beyond int64 saturate, narrower types
// keep the low bits, as ONNX Runtime's conversion through a wider integer does);
// between integers, two's complement wrap-around.
template <typename From, typename To>
To cast_one(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From{0};
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return To{0};
    if (v >= 9.2233720368547758e18f) return static_cast<To>(std::numeric_limits<int64_t>::max());
    if (v <= -9.2233720368547758e18f) return static_cast<To>(std::numeric_limits<int64_t>::min());
    return static_cast<To>(static_cast<int64_t>(v));
  } else {
    return static_cast<To>(v);
  }
}

template <typename From, typename To>
void convert(const Tensor& x, Tensor& y) {
  const From* s = static_cast<const From*>(x.raw());
  using Store = std::conditional_t<std::is_same_v<To, bool>, uint8_t, To>;
  Store* d = static_cast<Store*>(y.raw());
  for (int64_t p = 0; p < x.numel(); ++p) d[p] = static_cast<Store>(cast_one<From, To>(s[p]));
}

template <typename From>
void convert_to(const Tensor& x, Tensor& y, DType to) {
  switch (to) {
    case DType::kFloat32: return convert<From, float>(x, y);
    case DType::kInt64: return convert<From, int64_t>(x, y);
    case DType::kInt32: return convert<From, int32_t>(x, y);
    case DType::kInt16: return convert<From, int16_t>(x, y);
    case DType::kInt8: return convert<From, int8_t>(x, y);
    case DType::kUInt8: return convert<From, uint8_t>(x, y);
    default: return convert<From, bool>(x, y);
  }
}

// Cast(input, to) between float32, int64, int32, int16, int8, uint8 and bool.
Kernel cast(const Node& n, const std::vector<Meta>& in) {
  const int64_t to_attr = n.attr_i("to", 0);
  const std::map<int64_t, DType> types = {{1, DType::kFloat32}, {2, DType::kUInt8}, {3, DType::kInt8}, {5, DType::kInt16},
                                          {6, DType::kInt32},   {7, DType::kInt64}, {9, DType::kBool}};
  auto t = types.find(to_attr);
  if (t == types.end())
    unsupported(n, "Cast to ONNX type " + std::to_string(to_attr) + " (float, uint8, int8, int16, int32, int64 and bool only)");
  const DType from = in[0].dtype, to = t->second;
  Kernel k;
  k.outputs = {{in[0].shape, to}};
  k.run = [from, to](const In& i, const Out& o) {  // a bool input is read as uint8 0 / 1
    visit_dtype(from, [&](auto f) { convert_to<decltype(f)>(*i[0], *o[0], to); });
  };
  return k;
}

}  // namespace

void register_reference_gather() {
  add_reference({"Gather"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return gather(n, in); });
  add_reference({"Cast"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return cast(n, in); });
}

}  // namespace qfx::runtime
