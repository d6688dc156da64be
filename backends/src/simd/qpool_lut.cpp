// The onednn backend's int8 QLut (256-entry tables: Sigmoid, HardSwish, SiLU) and
// QLinearGlobalAveragePool, split over threads, channels last included. Each computes
// what the reference kernel computes (the same table; the same integer sums and
// Requantizer), so outputs are equal bit for bit.
#include <omp.h>

#include "../reference/common.h"

namespace qfx::runtime {
namespace {

using ref::In;
using ref::Out;
constexpr int64_t kParallelMin = 1 << 15;

bool qlut(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  if (r.in.empty() || (r.in[0].dtype != DType::kUInt8 && r.in[0].dtype != DType::kInt8)) return r.decline("needs an 8-bit input");
  auto it = n.attrs.find("table");
  if (it == n.attrs.end() || it->second.kind != ir::Attr::Kind::kInts || it->second.ints.size() != 256)
    return r.decline("no table of 256 codes (the reference reports it)");
  std::array<uint8_t, 256> table{};
  // Indexed by the input's byte: int8 code c sits at byte c & 255 (the table is by c + 128).
  const int offset = r.in[0].dtype == DType::kInt8 ? 128 : 0;
  for (int b = 0; b < 256; ++b) table[static_cast<size_t>(b)] = static_cast<uint8_t>(it->second.ints[static_cast<size_t>((b + offset) & 255)]);
  k->accepts_nhwc = r.nhwc_out;
  k->outputs = {{r.in[0].shape, n.out_q.dtype, r.nhwc_out && r.in[0].nhwc}};
  k->run = [table](const In& i, const Out& o) {
    const auto* x = static_cast<const uint8_t*>(i[0]->raw());
    auto* y = static_cast<uint8_t*>(o[0]->raw());
    const int64_t t = i[0]->numel();
#pragma omp parallel for if (t > kParallelMin)
    for (int64_t p = 0; p < t; ++p) y[p] = table[x[p]];
  };
  return true;
}

template <typename T>
void gap_sums(const T* x, int64_t N, int64_t C, int64_t HW, bool nhwc, int64_t* sums) {
  if (!nhwc) {
#pragma omp parallel for if (N * C * HW > kParallelMin)
    for (int64_t p = 0; p < N * C; ++p) {
      int64_t s = 0;
      const T* xp = x + p * HW;
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < HW; ++j) s += xp[j];
      sums[p] = s;
    }
    return;
  }
#pragma omp parallel for if (N * C * HW > kParallelMin)
  for (int64_t b = 0; b < N; ++b) {
    int64_t* sb = sums + b * C;
    for (int64_t c = 0; c < C; ++c) sb[c] = 0;
    for (int64_t j = 0; j < HW; ++j) {
      const T* row = x + (b * HW + j) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) sb[c] += row[c];
    }
  }
}

bool qgap(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  if (in.empty() || in[0].shape.size() != 4) return r.decline("needs a 4-D input");
  const DType xd = in[0].dtype, yd = n.out_q.dtype;
  if ((xd != DType::kUInt8 && xd != DType::kInt8) || (yd != DType::kUInt8 && yd != DType::kInt8)) return r.decline("needs 8-bit input and output");
  if (n.in_q.empty() || n.in_q[0].scale.size() != 1 || n.out_q.scale.size() != 1) return r.decline("per-channel qparams");
  if (divides_average_pool(n)) return r.decline("the target divides the sum of codes (average_pool: divide; the reference runs it)");
  const int64_t N = in[0].shape[0], C = in[0].shape[1], HW = in[0].shape[2] * in[0].shape[3];
  if (HW <= 0 || HW > (int64_t{1} << 23)) return r.decline("an empty or huge plane");
  const float sx = n.in_q[0].scale[0], sy = n.out_q.scale[0];
  const int32_t zx = n.in_q[0].zero_point[0], zy = n.out_q.zero_point[0];
  const ref::QRange q = ref::qrange(yd);
  const Requantizer rq = Requantizer::pooling(n.arithmetic, {sx / (sy * static_cast<float>(HW))}, n.label());
  const bool nhwc = in[0].nhwc;
  k->accepts_nhwc = true;  // [N, C, 1, 1] is the same bytes in either layout
  k->outputs = {{{N, C, 1, 1}, yd}};
  k->run = [=](const In& i, const Out& o) {
    std::vector<int64_t> sums(static_cast<size_t>(N * C));
    if (xd == DType::kUInt8) gap_sums(i[0]->data<uint8_t>(), N, C, HW, nhwc, sums.data());
    else gap_sums(i[0]->data<int8_t>(), N, C, HW, nhwc, sums.data());
    for (int64_t p = 0; p < N * C; ++p)
      ref::store_code(yd, o[0]->raw(), p, rq.code(static_cast<int32_t>(sums[static_cast<size_t>(p)] - HW * zx), 0, zy, q.lo, q.hi));
  };
  return true;
}

}  // namespace

void register_simd_pool_lut() {
  add_kernel("onednn", "QLut", "simd", qlut, /*takes_nhwc=*/true);
  add_kernel("onednn", "QLinearGlobalAveragePool", "simd", qgap, /*takes_nhwc=*/true);
}

}  // namespace qfx::runtime
