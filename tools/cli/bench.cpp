// qfx bench: side-by-side latency of the runtime against libtorch, measured in one run.
#include "bench.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <random>

#include "qfx/error.h"
#include "qfx/runtime/model.h"

namespace qfx::cli {
namespace {

// Median wall time of `fn` in milliseconds over `iters` runs after `warmup` runs.
double median_ms(const std::function<void()>& fn, int iters, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int run_bench(const BenchArgs& args) {
  at::set_num_threads(args.threads);
  torch::NoGradGuard ng;
  auto ts = torch::jit::load(args.torchscript);
  ts.eval();
  auto frozen = torch::jit::optimize_for_inference(ts);
  runtime::Model model = runtime::Model::load(args.onnx, {"onednn"});
  runtime::Model tapped = runtime::Model::load(args.onnx, {"onednn"});
  std::vector<std::string> names;
  for (const auto& in : tapped.inputs()) names.push_back(in.name);
  // Tap every float tensor the model computes, as calibration does.
  for (const auto& n : tapped.value_names()) names.push_back(n);
  std::printf("# %s vs %s, %d threads, median of %d runs (ms)\n", args.onnx.c_str(), args.torchscript.c_str(),
              args.threads, args.iters);
  std::printf("%-6s %14s %14s %10s %16s %12s\n", "batch", "libtorch fp32", "qfx fp32", "qfx/torch", "qfx fp32 + taps",
              "taps/plain");
  for (int64_t b : args.batches) {
    std::mt19937 rng(0);
    std::normal_distribution<float> nd;
    runtime::Tensor x({b, 3, args.size, args.size}, runtime::DType::kFloat32);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = nd(rng);
    at::Tensor xt = torch::from_blob(x.raw(), {b, 3, args.size, args.size}, torch::kFloat).clone();
    const double t_torch = median_ms([&] { frozen.forward({xt}); }, args.iters);
    const double t_qfx = median_ms([&] { model.run({{model.inputs()[0].name, x}}); }, args.iters);
    tapped.set_taps(names, runtime::TapKind::kHistogram, {2048, -10.0f, 10.0f});
    const double t_taps = median_ms([&] { tapped.run({{tapped.inputs()[0].name, x}}); }, args.iters);
    std::printf("%-6lld %14.2f %14.2f %10.2f %16.2f %12.2f\n", static_cast<long long>(b), t_torch, t_qfx,
                t_qfx / t_torch, t_taps, t_taps / t_qfx);
  }
  std::printf("# qfx/torch < 1: the runtime is faster than frozen, optimize_for_inference libtorch\n");
  return 0;
}

}  // namespace qfx::cli
