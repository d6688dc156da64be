// QLinearMatMul of two 8-bit activations on the onednn backend (attention's q·kᵀ and
// p·v): B is packed transposed with its zero point subtracted, as int16, and each
// output is an int32 dot product of two int16 rows (vpmaddwd), compiled for AVX-512BW,
// AVX2 and baseline x86-64 and chosen at run time. The sums are the reference's
// exactly (|a - za|, |b - zb| <= 255, so K <= 33025 keeps int32 exact; longer rows
// are declined) and requantized by the same Requantizer, so outputs are bit-identical.
#include <omp.h>

#include "../reference/common.h"

namespace qfx::runtime {
namespace {

using ref::In;
using ref::Out;

__attribute__((always_inline)) inline int32_t dot_body(const int16_t* a, const int16_t* b, int64_t K) {
  int32_t acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t k = 0; k < K; ++k) acc += static_cast<int32_t>(a[k]) * static_cast<int32_t>(b[k]);
  return acc;
}

// One output row: y[col] = dot(a, bt + col*K) for col < N.
using RowFn = void (*)(const int16_t* a, const int16_t* bt, int64_t K, int64_t N, int32_t* acc);
#define QFX_DOT_VARIANT(NAME, TARGET)                                                 \
  TARGET void NAME(const int16_t* a, const int16_t* bt, int64_t K, int64_t N, int32_t* acc) { \
    for (int64_t c = 0; c < N; ++c) acc[c] = dot_body(a, bt + c * K, K);             \
  }
QFX_DOT_VARIANT(row_avx512, __attribute__((target("avx512f,avx512bw"))))
QFX_DOT_VARIANT(row_avx2, __attribute__((target("avx2"))))
QFX_DOT_VARIANT(row_baseline, )
#undef QFX_DOT_VARIANT

RowFn row_fn() {
  const std::string isa = simd_isa();
  if (isa == "avx512" && __builtin_cpu_supports("avx512bw")) return row_avx512;
  if (isa == "avx512" || isa == "avx2") return row_avx2;
  return row_baseline;
}

// Element i of an 8-bit tensor minus its zero point, as int16.
inline int16_t centred(const Tensor& t, int64_t i, int32_t z) {
  return static_cast<int16_t>((t.dtype() == DType::kUInt8 ? int32_t{t.data<uint8_t>()[i]} : int32_t{t.data<int8_t>()[i]}) - z);
}

bool qmatmul_activations(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  if (n.op != "QLinearMatMul" || in.size() < 2 || (r.consts.size() > 1 && r.consts[1])) return r.decline("B is a constant (the weighted kernels run it)");
  for (const auto& m : in)
    if (m.dtype != DType::kUInt8 && m.dtype != DType::kInt8) return r.decline("inputs are not 8-bit");
  if (n.out_q.dtype != DType::kUInt8 && n.out_q.dtype != DType::kInt8) return r.decline("output is not 8-bit");
  const Shape &a = in[0].shape, &b = in[1].shape;
  if (a.size() < 2 || b.size() < 2 || b[b.size() - 2] != a.back()) return r.decline("shapes the reference reports");
  if (n.in_q.size() < 2 || n.in_q[0].scale.size() != 1 || n.in_q[1].scale.size() != 1 || n.out_q.scale.size() != 1)
    return r.decline("per-channel qparams");
  const int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
  if (K > 33025) return r.decline("rows longer than 33025 (int32 sums could overflow; the reference sums in 64 bits)");
  const Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const Shape batch = ref::broadcast(n, ba, bb);
  Shape out = batch;
  out.push_back(M);
  out.push_back(N);
  k->outputs = {{out, n.out_q.dtype}};
  const ref::QRange q = ref::act_range(n);
  const int32_t za = n.in_q[0].zero_point[0], zb = n.in_q[1].zero_point[0], zy = n.out_q.zero_point[0];
  const DType yd = n.out_q.dtype;
  const Requantizer rq = accumulator_requantizer(n, accumulator_multipliers(n, 1, nullptr));
  const RowFn row = row_fn();
  k->run = [=](const In& i, const Out& o) {
    const Tensor &x = *i[0], &w = *i[1];
    std::vector<int16_t> bt(static_cast<size_t>(N * K));
    ref::for_each_broadcast(batch, ba, bb, [&](int64_t p, int64_t qa, int64_t sb) {
      const int64_t b0 = sb * K * N;
#pragma omp parallel for if (K * N > (1 << 14))
      for (int64_t c = 0; c < N; ++c)
        for (int64_t kk = 0; kk < K; ++kk) bt[static_cast<size_t>(c * K + kk)] = centred(w, b0 + kk * N + c, zb);
#pragma omp parallel if (M * N * K > (1 << 16))
      {
        std::vector<int16_t> arow(static_cast<size_t>(K));
        std::vector<int32_t> acc(static_cast<size_t>(N));
#pragma omp for
        for (int64_t m = 0; m < M; ++m) {
          const int64_t a0 = (qa * M + m) * K;
          for (int64_t kk = 0; kk < K; ++kk) arow[static_cast<size_t>(kk)] = centred(x, a0 + kk, za);
          row(arow.data(), bt.data(), K, N, acc.data());
          const int64_t y0 = (p * M + m) * N;
          for (int64_t c = 0; c < N; ++c) ref::store_code(yd, o[0]->raw(), y0 + c, rq.code(acc[static_cast<size_t>(c)], 0, zy, q.lo, q.hi));
        }
      }
    });
  };
  return true;
}

}  // namespace

void register_simd_matmul() { add_kernel("onednn", "QLinearMatMul", "simd", qmatmul_activations); }

}  // namespace qfx::runtime
