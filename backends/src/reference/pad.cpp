// Reference kernel: Pad as the ONNX operator spec defines it (opset 13..18,
// onnx.ai/onnx/operators): modes constant (constant_value input, default 0), reflect
// (mirrored without repeating the edge) and edge (the edge repeated); pads for every
// axis or, from opset 18, for the axes input; negative pads crop. Any dtype.
#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

// The begin and end pads of every dim of a rank-`rank` input from the pads (and axes) inputs.
void read_pads(const Node& n, const std::vector<const Tensor*>& consts, size_t rank, std::vector<int64_t>* begin,
               std::vector<int64_t>* end) {
  const auto pads = int_values(need_known(n, consts, 1, "pads"));
  std::vector<int64_t> axes;
  if (has_input(n, 3)) {
    axes = int_values(need_known(n, consts, 3, "axes"));
  } else {
    for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  }
  if (pads.size() != 2 * axes.size())
    bad_shape(n, std::to_string(pads.size()) + " pads for " + std::to_string(axes.size()) + " axes (2 per axis)");
  begin->assign(rank, 0);
  end->assign(rank, 0);
  for (size_t j = 0; j < axes.size(); ++j) {
    const size_t d = static_cast<size_t>(norm_axis(n, axes[j], rank));
    const int64_t b = pads[j], e = pads[j + axes.size()];
    if (std::abs(b) > (int64_t{1} << 40) || std::abs(e) > (int64_t{1} << 40)) bad_shape(n, "pads beyond 2^40");
    (*begin)[d] = b;
    (*end)[d] = e;
  }
}

// The input coordinate output coordinate `o` reads along a dim of `len` (begin pad
// `b`), or -1 for the constant.
inline int64_t source(int64_t o, int64_t b, int64_t len, int mode) {
  int64_t s = o - b;
  if (s >= 0 && s < len) return s;
  if (mode == 0) return -1;
  if (mode == 2) return s < 0 ? 0 : len - 1;  // edge
  return s < 0 ? -s : 2 * (len - 1) - s;     // reflect (pads < len, checked)
}

Kernel pad(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const std::string m = n.attr_s("mode", "constant");
  if (m != "constant" && m != "reflect" && m != "edge") unsupported(n, "Pad mode '" + m + "' (constant, reflect and edge)");
  const int mode = m == "constant" ? 0 : m == "reflect" ? 1 : 2;
  const Shape x = in[0].shape;
  std::vector<int64_t> begin, end;
  read_pads(n, consts, x.size(), &begin, &end);
  Shape out = x;
  for (size_t d = 0; d < x.size(); ++d) {
    out[d] += begin[d] + end[d];
    if (out[d] < 0) bad_shape(n, "pads crop dim " + std::to_string(d) + " of " + shape_str(x) + " below 0");
    const bool pads = begin[d] > 0 || end[d] > 0;
    if (mode == 1 && pads && (begin[d] >= x[d] || end[d] >= x[d]))
      unsupported(n, "reflect pads of " + std::to_string(std::max(begin[d], end[d])) + " on a dim of " + std::to_string(x[d]) + " (pads must be below the dim)");
    if (mode == 2 && pads && x[d] == 0) bad_shape(n, "edge padding of an empty dim");
  }
  const bool has_value = mode == 0 && has_input(n, 2);
  if (has_value && in[2].dtype != in[0].dtype) bad_shape(n, "constant_value and data differ in dtype");
  Kernel k;
  k.outputs = {{out, in[0].dtype}};
  const size_t es = dtype_size(in[0].dtype);
  k.run = [=](const In& i, const Out& o) {
    const auto* src = static_cast<const uint8_t*>(i[0]->raw());
    auto* y = static_cast<uint8_t*>(o[0]->raw());
    uint8_t zero[8] = {};
    const uint8_t* value = has_value && i[2] && i[2]->numel() > 0 ? static_cast<const uint8_t*>(i[2]->raw()) : zero;
    const Index xs = strides_of(x);
    Index idx{};
    for (int64_t p = 0; p < numel(out); ++p) {
      int64_t off = 0;
      for (size_t d = 0; d < x.size() && off >= 0; ++d) {
        const int64_t s = source(idx[d], begin[d], x[d], mode);
        off = s < 0 ? -1 : off + s * xs[d];
      }
      std::memcpy(y + static_cast<size_t>(p) * es, off < 0 ? value : src + static_cast<size_t>(off) * es, es);
      for (size_t d = out.size(); d-- > 0;) {
        if (++idx[d] < out[d]) break;
        idx[d] = 0;
      }
    }
  };
  return k;
}

}  // namespace

void register_reference_pad() { add_reference({"Pad"}, pad); }

}  // namespace qfx::runtime
