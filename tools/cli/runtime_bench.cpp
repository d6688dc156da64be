// The runtime benchmark (see runtime_bench.h): no libtorch.
#include "runtime_bench.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "bench_timing.h"
#include "qfx/error.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/peak.h"

namespace qfx::cli {
using namespace qfx::runtime;

namespace {

// Median of `iters` timed runs after 3 warm-up runs (plans built, kernels loaded).
Timing time_model(const Model& m, const std::map<std::string, Tensor>& feeds, int iters) {
  for (int i = 0; i < 3; ++i) m.run(feeds);
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    m.run(feeds);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return timing_of(ms);
}

std::map<std::string, Tensor> random_feeds(const Model& m, int64_t batch) {
  std::mt19937 rng(0);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::map<std::string, Tensor> feeds;
  for (const auto& in : m.inputs()) {
    if (in.dtype != DType::kFloat32) throw qfx::DataError("input '" + in.name + "' is not float32: the benchmark feeds random floats");
    Shape s = in.shape;
    for (size_t d = 0; d < s.size(); ++d)
      if (s[d] < 0) s[d] = d == 0 ? batch : 1;
    if (!s.empty() && in.shape[0] < 0) s[0] = batch;
    Tensor t(s, DType::kFloat32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = nd(rng);
    feeds[in.name] = t;
  }
  return feeds;
}

}  // namespace

int run_runtime_bench(const RuntimeBenchArgs& a) {
  if (a.models.empty() || a.backends.empty() || a.batches.empty())
    throw ArgumentError("runtime bench: needs at least one model, backend and batch size");
  Peak peak;
  if (a.peak) {
    peak = measure_peak();
    std::printf("peak (%d threads, %lld^3 oneDNN matmuls): fp32 %.1f GFLOP/s (%s), int8 %.1f GOP/s (%s); memory read %.1f GB/s\n",
                peak.threads, static_cast<long long>(peak.size), peak.fp32_gflops, peak.fp32_impl.c_str(), peak.int8_gops,
                peak.int8_impl.c_str(), peak.read_gbps);
  }
  std::printf("| model | batch | backend | median ms | IQR ms | img/s | speed vs %s | GOP/s |%s\n|---|---:|---|---:|---:|---:|---:|---:|%s\n",
              a.backends[0].c_str(), a.peak ? " of peak |" : "", a.peak ? "---:|" : "");
  for (const auto& path : a.models) {
    std::vector<Model> loaded;
    for (const auto& b : a.backends) loaded.push_back(Model::load(path, ModelOptions(b)));
    const double limit = loaded[0].integer_ops().empty() ? peak.fp32_gflops : peak.int8_gops;
    for (int64_t batch : a.batches) {
      std::vector<Timing> t;
      const auto feeds = random_feeds(loaded[0], batch);
      std::vector<std::vector<int64_t>> shapes;
      for (const auto& in : loaded[0].inputs()) shapes.push_back(feeds.at(in.name).shape());
      const double gop = 2.0 * static_cast<double>(loaded[0].multiply_accumulates(shapes)) / 1e9;
      for (const auto& m : loaded) t.push_back(time_model(m, feeds, a.iters));
      for (size_t i = 0; i < a.backends.size(); ++i) {
        const double rate = gop / (t[i].median / 1000.0);
        std::printf("| %s | %lld | %s | %.3f | %.3f | %.1f | %.2fx | %.1f |", path.substr(path.find_last_of('/') + 1).c_str(),
                    static_cast<long long>(batch), a.backends[i].c_str(), t[i].median, t[i].iqr,
                    1000.0 * static_cast<double>(batch) / t[i].median, t[0].median / t[i].median, rate);
        if (a.peak) std::printf(" %.0f %% |", 100.0 * rate / limit);
        std::printf("\n");
      }
      double worst = 0;
      if (timings_disagree(t, a.iters, &worst))
        std::printf("(timings spread by %.0f%% of their median: the machine was busy; ratios are not reliable)\n", 100 * worst);
    }
  }
  return 0;
}

}  // namespace qfx::cli
