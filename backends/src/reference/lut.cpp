// QLut: an int8 -> int8 lookup table, what a target's `arithmetic.lut` makes of a
// DequantizeLinear -> Sigmoid/Tanh/... -> QuantizeLinear group. The table (attribute
// "table", 256 codes indexed by input code - lowest code) is computed at load
// from the op's float kernel, so it equals what the unfused group computes.
#include "common.h"

namespace qfx::runtime {
namespace ref {
namespace {

Kernel lut(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) {
  if (in[0].dtype != DType::kUInt8 && in[0].dtype != DType::kInt8) unsupported(n, "QLut needs an 8-bit input");
  auto it = n.attrs.find("table");
  if (it == n.attrs.end() || it->second.kind != ir::Attr::Kind::kInts || it->second.ints.size() != 256)
    bad_shape(n, "QLut needs a 'table' of 256 codes");
  std::array<uint8_t, 256> table{};
  for (size_t i = 0; i < 256; ++i) table[i] = static_cast<uint8_t>(it->second.ints[i]);  // int8 codes as their bytes
  Kernel k;
  k.outputs = {{in[0].shape, n.out_q.dtype}};
  const int offset = in[0].dtype == DType::kInt8 ? 128 : 0;
  k.run = [table, offset](const In& i, const Out& o) {
    const uint8_t* x = static_cast<const uint8_t*>(i[0]->raw());
    uint8_t* y = static_cast<uint8_t*>(o[0]->raw());
    const int64_t total = i[0]->numel();
    if (offset == 0) {
      for (int64_t p = 0; p < total; ++p) y[p] = table[x[p]];
    } else {
      for (int64_t p = 0; p < total; ++p) y[p] = table[static_cast<uint8_t>(static_cast<int8_t>(x[p]) + 128)];
    }
  };
  return k;
}

}  // namespace
}  // namespace ref

void register_reference_lut() { ref::add_reference({"QLut"}, ref::lut, true); }

}  // namespace qfx::runtime
