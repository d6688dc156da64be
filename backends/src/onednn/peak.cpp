// measure_peak (see qfx/runtime/peak.h): large oneDNN matmuls, timed.
#include "qfx/runtime/peak.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>
#include "common.h"
#include "qfx/error.h"

namespace qfx::runtime {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// GOP/s (or GFLOP/s) of the best of `iters` runs of an M = N = K = n matmul.
double best_rate(dt a_t, dt b_t, dt c_t, int64_t n, int iters, std::string* impl) {
  dnnl::engine& eng = onednn::engine();
  dnnl::stream s(eng);
  const dnnl::memory::dims d = {n, n};
  dnnl::memory::desc a_md(d, a_t, tag::ab), c_md(d, c_t, tag::ab);
  dnnl::memory::desc b_any(d, b_t, tag::any);  // the weights in the layout the kernel prefers, as the runtime packs them
  const auto pd = onednn::matmul_pd(a_md, b_any, dnnl::memory::desc(), c_md, dnnl::primitive_attr());
  *impl = pd.impl_info_str();
  dnnl::memory a(a_md, eng), b(pd.weights_desc(), eng), c(c_md, eng);
  const size_t a_bytes = a_md.get_size(), b_bytes = pd.weights_desc().get_size();
  // Small integers in every element type (7-bit weights: no int16 saturation on CPUs without VNNI).
  std::vector<uint8_t> fill(std::max(a_bytes, b_bytes));
  for (size_t i = 0; i < fill.size(); ++i) fill[i] = static_cast<uint8_t>((i * 37) % 64);
  if (a_t == dt::f32) {
    std::vector<float> f(fill.size() / 4 + 1);
    for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(fill[i] % 7) * 0.25f;
    std::memcpy(a.get_data_handle(), f.data(), a_bytes);
    std::memcpy(b.get_data_handle(), f.data(), b_bytes);
  } else {
    std::memcpy(a.get_data_handle(), fill.data(), a_bytes);
    std::memcpy(b.get_data_handle(), fill.data(), b_bytes);
  }
  dnnl::matmul mm(pd);
  auto run = [&] {
    mm.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    s.wait();
  };
  run();  // warm-up: JIT and first touch
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / best / 1e9;
}

// GB/s of the best of `iters` sums over 256 MiB of float32, on every OpenMP thread.
// Each thread sums into 32 independent lanes (four 8-float vectors), so the adds'
// latency never limits the rate: one accumulator read 4 bytes per add latency.
double read_bandwidth(int iters) {
  typedef float v8 __attribute__((vector_size(32)));
  const int64_t n = int64_t{64} << 20, vecs = n / 8;
  std::vector<v8> x(static_cast<size_t>(vecs));
#pragma omp parallel for
  for (int64_t i = 0; i < vecs; ++i) x[static_cast<size_t>(i)] = v8{} + static_cast<float>(i & 7);  // pages touched by their readers
  double best = 1e30, sink = 0;
  for (int it = 0; it < iters + 1; ++it) {  // the first pass warms up
    const auto t0 = std::chrono::steady_clock::now();
    double s = 0;
#pragma omp parallel reduction(+ : s)
    {
      v8 a0{}, a1{}, a2{}, a3{};
#pragma omp for
      for (int64_t i = 0; i < vecs; i += 4) {
        a0 += x[static_cast<size_t>(i)];
        a1 += x[static_cast<size_t>(i + 1)];
        a2 += x[static_cast<size_t>(i + 2)];
        a3 += x[static_cast<size_t>(i + 3)];
      }
      const v8 t = a0 + a1 + a2 + a3;
      for (int l = 0; l < 8; ++l) s += t[l];
    }
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink += s;
    if (it > 0) best = std::min(best, t);
  }
  if (sink < 0) best *= 2;  // keeps the sums (never true: the values are non-negative)
  return 4.0 * static_cast<double>(n) / best / 1e9;
}

}  // namespace

Peak measure_peak(int64_t size, int iters) {
  if (size < 64) throw ArgumentError("measure_peak: size must be at least 64");
  if (iters < 1) throw ArgumentError("measure_peak: iters must be at least 1");
  Peak p;
  p.size = size;
  p.threads = omp_get_max_threads();
  p.fp32_gflops = best_rate(dt::f32, dt::f32, dt::f32, size, iters, &p.fp32_impl);
  p.int8_gops = best_rate(dt::u8, dt::s8, dt::s32, size, iters, &p.int8_impl);
  p.read_gbps = read_bandwidth(iters);
  return p;
}

}  // namespace qfx::runtime
