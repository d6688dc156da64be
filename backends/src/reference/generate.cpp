// Reference kernels whose output shape comes from input values, as the ONNX operator
// spec defines them (onnx.ai/onnx/operators): Range, ConstantOfShape, Tile and Split.
// Those values must be known when the model is planned (initializers, or shape
// arithmetic the planner folds, as Reshape's shape is); the data inputs of Tile and
// Split may be computed.
#include <type_traits>

#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

// Range(start, limit, delta): start + i * delta for i < max(ceil((limit - start) / delta), 0);
// float32, int64 or int32 scalars of one dtype.
Kernel range(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  check_dtype(n, in[0].dtype, {DType::kFloat32, DType::kInt64, DType::kInt32});
  check_same_dtype(n, in);
  const Tensor &s = need_known(n, consts, 0, "start"), &l = need_known(n, consts, 1, "limit"), &d = need_known(n, consts, 2, "delta");
  if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1) bad_shape(n, "start, limit and delta must be scalars");
  const DType dt = in[0].dtype;
  int64_t count = 0;
  if (dt == DType::kFloat32) {
    const double start = s.data<float>()[0], limit = l.data<float>()[0], delta = d.data<float>()[0];
    if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) bad_shape(n, "delta 0 or a value not finite");
    const double c = std::ceil((limit - start) / delta);
    if (c > static_cast<double>(int64_t{1} << 40)) bad_shape(n, "more than 2^40 elements");
    count = std::max<int64_t>(static_cast<int64_t>(c), 0);
  } else {
    const auto v = [](const Tensor& t) { return int_values(t)[0]; };
    const int64_t start = v(s), limit = v(l), delta = v(d);
    if (delta == 0) bad_shape(n, "delta 0");
    // ceil((limit - start) / delta) in 128-bit-safe steps: the distance fits in uint64.
    const bool up = delta > 0;
    if (up ? limit > start : limit < start) {
      const uint64_t dist = up ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start) : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
      const uint64_t step = up ? static_cast<uint64_t>(delta) : uint64_t{0} - static_cast<uint64_t>(delta);
      const uint64_t c = dist / step + (dist % step != 0);
      if (c > (uint64_t{1} << 40)) bad_shape(n, "more than 2^40 elements");
      count = static_cast<int64_t>(c);
    }
  }
  Kernel k;
  k.outputs = {{{count}, dt}};
  k.run = [dt, count](const In& i, const Out& o) {
    visit_dtype(dt, [&](auto t) {
      using T = decltype(t);
      const T start = i[0]->data<T>()[0], delta = i[2]->data<T>()[0];
      T* y = o[0]->data<T>();
      for (int64_t j = 0; j < count; ++j) {
        if constexpr (std::is_floating_point_v<T>) y[j] = start + static_cast<T>(j) * delta;
        else y[j] = static_cast<T>(static_cast<int64_t>(start) + j * static_cast<int64_t>(delta));  // within [start, limit)
      }
    });
  };
  return k;
}

// ConstantOfShape(shape): the `value` attribute's one element (default float32 0)
// repeated over the shape.
Kernel constant_of_shape(const Node& n, const std::vector<Meta>&, const std::vector<const Tensor*>& consts) {
  const auto shape = int_values(need_known(n, consts, 0, "the shape"));
  for (int64_t d : shape)
    if (d < 0 || d > (int64_t{1} << 40)) bad_shape(n, "dim " + std::to_string(d) + " outside 0..2^40");
  Tensor value({1}, DType::kFloat32);
  if (n.has("value")) value = n.attrs.at("value").t;
  if (!value.defined() || value.numel() != 1) bad_shape(n, "the value attribute must be a one-element tensor");
  Kernel k;
  k.outputs = {{Shape(shape.begin(), shape.end()), value.dtype()}};
  k.run = [value](const In&, const Out& o) {
    const size_t es = dtype_size(value.dtype());
    auto* y = static_cast<uint8_t*>(o[0]->raw());
    for (int64_t p = 0; p < o[0]->numel(); ++p) std::memcpy(y + static_cast<size_t>(p) * es, value.raw(), es);
  };
  return k;
}

// Tile(input, repeats): out[d] = input[d] * repeats[d], any dtype.
Kernel tile(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape x = in[0].shape;
  const auto rep = int_values(need_known(n, consts, 1, "repeats"));
  if (rep.size() != x.size()) bad_shape(n, std::to_string(rep.size()) + " repeats for rank " + std::to_string(x.size()));
  Shape out = x;
  for (size_t d = 0; d < x.size(); ++d) {
    if (rep[d] < 0 || rep[d] > (int64_t{1} << 31)) bad_shape(n, "repeat " + std::to_string(rep[d]) + " outside 0..2^31");
    out[d] *= rep[d];
  }
  Kernel k;
  k.outputs = {{out, in[0].dtype}};
  const size_t es = dtype_size(in[0].dtype);
  k.run = [x, out, es](const In& i, const Out& o) {
    const auto* src = static_cast<const uint8_t*>(i[0]->raw());
    auto* y = static_cast<uint8_t*>(o[0]->raw());
    const Index xs = strides_of(x);
    Index idx{};
    for (int64_t p = 0; p < numel(out); ++p) {
      int64_t off = 0;
      for (size_t d = 0; d < x.size(); ++d) off += (idx[d] % x[d]) * xs[d];
      std::memcpy(y + static_cast<size_t>(p) * es, src + static_cast<size_t>(off) * es, es);
      for (size_t d = out.size(); d-- > 0;) {
        if (++idx[d] < out[d]) break;
        idx[d] = 0;
      }
    }
  };
  return k;
}

// The sizes of Split's outputs along a dim of `dim`: the split input, else
// num_outputs pieces of ceil(dim / num_outputs) (opset 18; the last one smaller), else
// `outputs` equal pieces.
std::vector<int64_t> split_sizes(const Node& n, const std::vector<const Tensor*>& consts, int64_t dim, size_t outputs) {
  std::vector<int64_t> sizes;
  if (has_input(n, 1)) {
    sizes = int_values(need_known(n, consts, 1, "split"));
  } else if (n.has("num_outputs")) {
    const int64_t num = n.attr_i("num_outputs", 0);
    if (num < 1 || static_cast<size_t>(num) != outputs) bad_shape(n, "num_outputs " + std::to_string(num) + " for " + std::to_string(outputs) + " outputs");
    const int64_t chunk = (dim + num - 1) / num;
    for (int64_t j = 0; j < num; ++j) sizes.push_back(std::max<int64_t>(std::min(chunk, dim - j * chunk), 0));
  } else {
    if (dim % static_cast<int64_t>(outputs) != 0) bad_shape(n, "cannot split " + std::to_string(dim) + " into " + std::to_string(outputs) + " equal parts");
    sizes.assign(outputs, dim / static_cast<int64_t>(outputs));
  }
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s < 0) bad_shape(n, "negative split size");
    sum += s;
  }
  if (sizes.size() != outputs || sum != dim)
    bad_shape(n, std::to_string(sizes.size()) + " sizes summing to " + std::to_string(sum) + " for " + std::to_string(outputs) +
                     " outputs along a dim of " + std::to_string(dim));
  return sizes;
}

Kernel split(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape& x = in[0].shape;
  const int64_t axis = norm_axis(n, n.attr_i("axis", 0), x.size());
  const AxisSplit s = split_at(x, axis);
  const std::vector<int64_t> sizes = split_sizes(n, consts, s.dim, n.outputs.size());
  Kernel k;
  for (int64_t sz : sizes) {
    Shape o = x;
    o[static_cast<size_t>(axis)] = sz;
    k.outputs.push_back({o, in[0].dtype});
  }
  const size_t es = dtype_size(in[0].dtype);
  k.run = [s, sizes, es](const In& i, const Out& o) {
    const auto* src = static_cast<const uint8_t*>(i[0]->raw());
    const size_t row = static_cast<size_t>(s.dim * s.inner) * es;
    size_t col = 0;
    for (size_t t = 0; t < sizes.size(); ++t) {
      const size_t w = static_cast<size_t>(sizes[t] * s.inner) * es;
      if (o[t])
        for (int64_t a = 0; a < s.outer; ++a)
          std::memcpy(static_cast<uint8_t*>(o[t]->raw()) + static_cast<size_t>(a) * w, src + static_cast<size_t>(a) * row + col, w);
      col += w;
    }
  };
  return k;
}

}  // namespace

void register_reference_generate() {
  add_reference({"Range"}, range);
  add_reference({"ConstantOfShape"}, constant_of_shape);
  add_reference({"Tile"}, tile);
  add_reference({"Split"}, split);
}

}  // namespace qfx::runtime
