// Float MatMul by a constant 2-D weight for up to 4 rows (a decode step, a small
// batch) on the onednn backend: oneDNN's inner product reads the weight at about
// half the memory bandwidth at these shapes (docs/benchmarks.md). This kernel copies
// the weight [K, N] once, when built, into panels of 16 columns ([N / 16][K][16],
// each panel one contiguous stream) and keeps each row's 16 sums of a panel in
// registers over all of K; columns past the last whole panel are read from the
// weight itself. The sums run in k order with FMA (AVX2 + FMA, or baseline x86-64,
// chosen at run time); they differ from the reference's in rounding only.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "../kernels.h"

namespace qfx::runtime {
namespace {

constexpr int64_t kMaxRows = 4;
constexpr int64_t kPanel = 16;

// Rows [0, R) of y ([rows, N]) at panel p's 16 columns: sum over k of a[r, k] * panel[k].
template <int R>
__attribute__((target("avx2,fma"))) void panel_avx2(const float* a, int64_t K, const float* panel, float* y, int64_t N, int64_t n0) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 w0 = _mm256_loadu_ps(panel + k * kPanel), w1 = _mm256_loadu_ps(panel + k * kPanel + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * K + k);
      acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(y + r * N + n0, acc[r][0]);
    _mm256_storeu_ps(y + r * N + n0 + 8, acc[r][1]);
  }
}

template <int R>
void panel_baseline(const float* a, int64_t K, const float* panel, float* y, int64_t N, int64_t n0) {
  float acc[R][kPanel] = {};
  for (int64_t k = 0; k < K; ++k)
    for (int r = 0; r < R; ++r)
      for (int64_t c = 0; c < kPanel; ++c) acc[r][c] += a[r * K + k] * panel[k * kPanel + c];
  for (int r = 0; r < R; ++r)
    for (int64_t c = 0; c < kPanel; ++c) y[r * N + n0 + c] = acc[r][c];
}

using PanelFn = void (*)(const float*, int64_t, const float*, float*, int64_t, int64_t);

bool gemv(const KernelRequest& r, Kernel* k) {
  if (r.in.size() != 2 || r.in[0].dtype != DType::kFloat32 || r.in[0].shape.size() < 2 || r.consts.size() < 2 || !r.consts[1])
    return r.decline("needs a float32 input of rank >= 2 and a constant weight");
  const Tensor& w = *r.consts[1];
  if (w.dtype() != DType::kFloat32 || w.shape().size() != 2 || w.shape()[0] != r.in[0].shape.back())
    return r.decline("the weight is not a float32 [K, N] matching the input");
  int64_t M = 1;
  for (size_t d = 0; d + 1 < r.in[0].shape.size(); ++d) M *= r.in[0].shape[d];
  if (M > kMaxRows || M < 1) return r.decline("more than " + std::to_string(kMaxRows) + " rows (oneDNN's matmul)");
  const int64_t K = w.shape()[0], N = w.shape()[1], panels = N / kPanel;
  const bool avx2 = simd_isa() != "baseline" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const PanelFn fns[4] = {avx2 ? panel_avx2<1> : panel_baseline<1>, avx2 ? panel_avx2<2> : panel_baseline<2>,
                          avx2 ? panel_avx2<3> : panel_baseline<3>, avx2 ? panel_avx2<4> : panel_baseline<4>};
  const PanelFn f = fns[M - 1];
  auto packed = std::make_shared<std::vector<float>>(static_cast<size_t>(panels * K * kPanel));
  const float* W = w.data<float>();
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t kk = 0; kk < K; ++kk)
      std::copy(W + kk * N + p * kPanel, W + kk * N + (p + 1) * kPanel, packed->data() + (p * K + kk) * kPanel);
  Shape out = r.in[0].shape;
  out.back() = N;
  k->outputs = {{out, DType::kFloat32}};
  const Tensor weight = w;  // the last columns' source, kept alive with the kernel
  k->run = [=](const std::vector<const Tensor*>& in, const std::vector<Tensor*>& o) {
    const float* a = in[0]->data<float>();
    float* y = o[0]->data<float>();
#pragma omp parallel for schedule(static) if (K * N > (1 << 16))
    for (int64_t p = 0; p < panels; ++p) f(a, K, packed->data() + p * K * kPanel, y, N, p * kPanel);
    for (int64_t r = 0; r < M; ++r)  // columns past the last whole panel
      for (int64_t c = panels * kPanel; c < N; ++c) {
        float s = 0;
        for (int64_t kk = 0; kk < K; ++kk) s += a[r * K + kk] * weight.data<float>()[kk * N + c];
        y[r * N + c] = s;
      }
  };
  return true;
}

}  // namespace

void register_simd_gemv() { add_kernel("onednn", "MatMul", "simd", gemv); }

}  // namespace qfx::runtime
