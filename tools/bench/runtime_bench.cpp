// Side-by-side latency of ONNX models on several runtime backends, measured in one
// run: median and interquartile range of repeated runs, images per second, and each
// backend's speed relative to the first. Links only the runtime (no libtorch), so it
// runs where qfx's models are deployed, GPU machines included.
//   qfx_runtime_bench MODEL.onnx... [--backends onednn,cuda] [--batch 1,32] [--iters 20]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/bench_timing.h"
#include "qfx/error.h"
#include "qfx/runtime/model.h"

using namespace qfx::runtime;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Median of `iters` timed runs after 3 warm-up runs (plans built, kernels loaded).
qfx::cli::Timing time_model(const Model& m, const std::map<std::string, Tensor>& feeds, int iters) {
  for (int i = 0; i < 3; ++i) m.run(feeds);
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    m.run(feeds);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return qfx::cli::timing_of(ms);
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

int main(int argc, char** argv) {
  std::vector<std::string> models, backends = {"onednn", "cuda"};
  std::vector<int64_t> batches = {1, 32};
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--backends" && has_value) backends = split(argv[++i]);
    else if (a == "--batch" && has_value) {
      batches.clear();
      for (const auto& b : split(argv[++i])) batches.push_back(std::stoll(b));
    } else if (a == "--iters" && has_value) iters = std::max(1, std::atoi(argv[++i]));
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "usage: %s MODEL.onnx... [--backends onednn,cuda] [--batch 1,32] [--iters 20]\n", argv[0]);
      return 2;
    } else models.push_back(a);
  }
  if (models.empty() || backends.empty()) {
    std::fprintf(stderr, "usage: %s MODEL.onnx... [--backends onednn,cuda] [--batch 1,32] [--iters 20]\n", argv[0]);
    return 2;
  }
  try {
    std::printf("| model | batch | backend | median ms | IQR ms | img/s | speed vs %s |\n|---|---:|---|---:|---:|---:|---:|\n",
                backends[0].c_str());
    for (const auto& path : models) {
      std::vector<Model> loaded;
      for (const auto& b : backends) loaded.push_back(Model::load(path, ModelOptions(b)));
      for (int64_t batch : batches) {
        std::vector<qfx::cli::Timing> t;
        for (const auto& m : loaded) t.push_back(time_model(m, random_feeds(m, batch), iters));
        for (size_t i = 0; i < backends.size(); ++i)
          std::printf("| %s | %lld | %s | %.3f | %.3f | %.1f | %.2fx |\n", path.substr(path.find_last_of('/') + 1).c_str(),
                      static_cast<long long>(batch), backends[i].c_str(), t[i].median, t[i].iqr,
                      1000.0 * static_cast<double>(batch) / t[i].median, t[0].median / t[i].median);
        double worst = 0;
        if (qfx::cli::timings_disagree(t, iters, &worst))
          std::printf("(timings spread by %.0f%% of their median: the machine was busy; ratios are not reliable)\n", 100 * worst);
      }
    }
  } catch (const qfx::Error& e) {
    std::fprintf(stderr, "qfx_runtime_bench: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}
