// QIntGelu, QIntSoftmax, QIntLayerNorm: the integer-only transformer ops a target's
// `arithmetic.integer_only` makes of DequantizeLinear -> op -> QuantizeLinear groups
// (qfx/runtime/integer_only.h, I-BERT). Inputs and outputs are 8-bit per-tensor codes.
#include "common.h"
#include "qfx/runtime/integer_only.h"

namespace qfx::runtime {
namespace ref {
namespace {

namespace io = integer_only;

// GELU of an 8-bit input: the 256 codes computed once at build, then a table.
Kernel gelu(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) {
  check_8bit(n, in[0]);
  const QRange r = qrange(n.out_q.dtype);
  const io::Gelu g = io::make_gelu(n.in_q[0].scale[0], n.in_q[0].zero_point[0], n.out_q.scale[0], n.out_q.zero_point[0],
                                   r.lo, r.hi, n.arithmetic.rounding, n.label().c_str());
  const int lo = in[0].dtype == DType::kInt8 ? -128 : 0;
  std::array<int32_t, 256> table{};
  for (int k = 0; k < 256; ++k) table[k] = io::gelu(lo + k, g);
  Kernel k;
  k.outputs = {{in[0].shape, n.out_q.dtype}};
  const DType out = n.out_q.dtype;
  k.run = [table, lo, out](const In& i, const Out& o) {
    const int64_t total = i[0]->numel();
    for (int64_t p = 0; p < total; ++p) store_code(out, o[0]->raw(), p, table[qload(*i[0], p) - lo]);
  };
  return k;
}

// Calls f(TI{}, TO{}) with the input's and output's 8-bit code types.
template <typename F>
void with_code_types(bool s8_in, bool s8_out, F&& f) {
  if (s8_in && s8_out) f(int8_t{}, int8_t{});
  else if (s8_in) f(int8_t{}, uint8_t{});
  else if (s8_out) f(uint8_t{}, int8_t{});
  else f(uint8_t{}, uint8_t{});
}

template <typename TI, typename TO>
void softmax_rows(const Tensor& x, Tensor& y, int64_t outer, int64_t n, int64_t inner, const io::Softmax& s) {
  std::vector<int64_t> scratch(static_cast<size_t>(n));
  const TI* xp = x.data<TI>();
  TO* yp = y.data<TO>();
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t b = 0; b < inner; ++b)
      io::softmax_row(xp + a * n * inner + b, yp + a * n * inner + b, n, inner, s, scratch.data());
}

Kernel softmax(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) {
  check_8bit(n, in[0]);
  const Shape& sh = in[0].shape;
  const int64_t axis = norm_axis(n, n.attr_i("axis", -1), sh.size());
  const QRange r = qrange(n.out_q.dtype);
  const io::Softmax s = io::make_softmax(n.in_q[0].scale[0], n.out_q.scale[0], n.out_q.zero_point[0], r.lo, r.hi,
                                         n.arithmetic.rounding, n.label().c_str());
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= sh[d];
  const int64_t len = sh[axis], inner = inner_numel(sh, static_cast<size_t>(axis) + 1);
  Kernel k;
  k.outputs = {{sh, n.out_q.dtype}};
  const bool s8_in = in[0].dtype == DType::kInt8, s8_out = n.out_q.dtype == DType::kInt8;
  k.run = [=](const In& i, const Out& o) {
    if (len == 0) return;
    with_code_types(s8_in, s8_out, [&](auto ti, auto to) {
      softmax_rows<decltype(ti), decltype(to)>(*i[0], *o[0], outer, len, inner, s);
    });
  };
  return k;
}

template <typename TI, typename TO>
void layer_norm_rows(const Tensor& x, Tensor& y, int64_t rows, const io::LayerNorm& ln) {
  std::vector<int64_t> scratch(static_cast<size_t>(ln.n));
  for (int64_t r = 0; r < rows; ++r) io::layer_norm_row(x.data<TI>() + r * ln.n, y.data<TO>() + r * ln.n, ln, scratch.data());
}

std::vector<float> floats_of(const Node& n, const std::vector<const Tensor*>& consts, size_t i, int64_t count, const char* what) {
  if (i >= n.inputs.size() || n.inputs[i].empty()) return {};
  const Tensor& t = need_const(n, consts, i, what, DType::kFloat32, count);
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

Kernel layer_norm(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  check_8bit(n, in[0]);
  const Shape& sh = in[0].shape;
  const int64_t axis = norm_axis(n, n.attr_i("axis", -1), sh.size());
  const int64_t len = inner_numel(sh, static_cast<size_t>(axis));
  const QRange r = qrange(n.out_q.dtype);
  const io::LayerNorm ln = io::make_layer_norm(len, n.in_q[0].scale[0], n.in_q[0].zero_point[0], n.attr_f("epsilon", 1e-5f),
                                               floats_of(n, consts, 1, len, "weight"), floats_of(n, consts, 2, len, "bias"),
                                               n.out_q.scale[0], n.out_q.zero_point[0], r.lo, r.hi, n.arithmetic.rounding,
                                               n.label().c_str());
  Kernel k;
  k.outputs = {{sh, n.out_q.dtype}};
  const bool s8_in = in[0].dtype == DType::kInt8, s8_out = n.out_q.dtype == DType::kInt8;
  k.run = [=](const In& i, const Out& o) {
    const int64_t rows = len == 0 ? 0 : i[0]->numel() / len;
    with_code_types(s8_in, s8_out, [&](auto ti, auto to) { layer_norm_rows<decltype(ti), decltype(to)>(*i[0], *o[0], rows, ln); });
  };
  return k;
}

}  // namespace
}  // namespace ref

void register_reference_integer_only() {
  ref::add_reference({"QIntGelu"}, ref::gelu, true);
  ref::add_reference({"QIntSoftmax"}, ref::softmax);
  ref::add_reference({"QIntLayerNorm"}, ref::layer_norm);
}

}  // namespace qfx::runtime
