// The `cuda` backend on whole int8 models against the reference backend, and the GPU
// lattice histogram against the CPU bin rule.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "qfx/runtime/model.h"

using namespace qfx::runtime;

// The calibration observer's lattice count on the GPU against the observer's bin rule
// (hd::HistogramLattice::counted_bin) on the CPU, with values on bin edges, beyond both
// ends, and a NaN flagged.
TEST(CudaHistogram, LatticeCountsEqualTheObserverRule) {
  QFX_REQUIRE_CUDA();
  std::mt19937 rng(23);
  std::normal_distribution<float> nd(0.5f, 3.0f);
  const hd::HistogramLattice lattices[] = {{-4.0, 2048.0 / 9.0, 0, 1}, {-7.3, 1000.0, -40, 7}, {0.0, 1.0 / 0.013, 3, 2}};
  for (const auto& g : lattices)
    for (int64_t bins : {2048, 8192}) {
      std::vector<float> x(1 << 20);
      for (float& v : x) v = nd(rng);
      for (int64_t b = 0; b < 64; ++b)  // values on interior edges: cell off + b k
        x[static_cast<size_t>(b)] = static_cast<float>(g.lo + static_cast<double>(g.off + b * 17 * g.k) / g.inv);
      std::vector<double> cpu(static_cast<size_t>(bins), 0.0), gpu(static_cast<size_t>(bins), 0.0);
      float lo = INFINITY, hi = -INFINITY;
      for (float v : x) {
        cpu[static_cast<size_t>(g.counted_bin(v, bins))] += 1;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      float glo, ghi;
      bool nonfinite = true;
      cuda_lattice_histogram(x.data(), static_cast<int64_t>(x.size()), g, bins, gpu.data(), &glo, &ghi, &nonfinite);
      EXPECT_EQ(cpu, gpu) << bins << " bins, k " << g.k;
      EXPECT_EQ(lo, glo);
      EXPECT_EQ(hi, ghi);
      EXPECT_FALSE(nonfinite);
      x[7] = std::nanf("");
      cuda_lattice_histogram(x.data(), static_cast<int64_t>(x.size()), g, bins, gpu.data(), &glo, &ghi, &nonfinite);
      EXPECT_TRUE(nonfinite) << "a NaN must be flagged";
    }
}

namespace {

// The models to check: every *.onnx in $QFX_CUDA_MODELS (tools/gpu/prove.sh fills it
// with qfx ptq outputs, int8 and fp32), else the ONNX fixtures.
std::vector<std::filesystem::path> models_to_check() {
  std::vector<std::filesystem::path> out;
  const char* dir = std::getenv("QFX_CUDA_MODELS");
  const std::filesystem::path d = dir ? dir : QFX_FIXTURE_DIR "/onnx";
  if (!std::filesystem::is_directory(d)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(d))
    if (e.path().extension() == ".onnx") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

Tensor random_input(const TensorInfo& info, std::mt19937& rng) {
  Shape s = info.shape;
  for (auto& d : s) d = d < 0 ? 2 : d;  // dynamic batch: 2
  Tensor t(s, DType::kFloat32);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = nd(rng);
  return t;
}

}  // namespace

// Each model on "cuda" and "reference": an int8 model's every value equal bit for bit,
// with values between GPU kernels kept on the device; a float model's outputs within
// 1e-4 relative.
TEST(CudaModels, OutputsMatchReference) {
  QFX_REQUIRE_CUDA();
  const auto models = models_to_check();
  ASSERT_FALSE(models.empty()) << "no models: set QFX_CUDA_MODELS to a folder of them";
  std::mt19937 rng(22);
  for (const auto& path : models) {
    Model ref = Model::load(path.string(), ModelOptions("reference"));
    Model dev = Model::load(path.string(), ModelOptions("cuda"));
    std::map<std::string, Tensor> feeds;
    for (const auto& in : ref.inputs()) {
      if (in.dtype != DType::kFloat32) GTEST_SKIP() << path << ": integer inputs";
      feeds[in.name] = random_input(in, rng);
    }
    // Every value, intermediate ones included (device-resident ones are copied to the
    // host for the watch callback), must equal the reference's.
    std::map<std::string, Tensor> seen_ref, seen_dev;
    // Which implementation ran each op (after a run: plans of dynamic shapes are made then).
    std::string where;
    auto expect_on_gpu = [&] {
      int on_gpu = 0;
      for (const auto& [k, count] : dev.kernel_impls()) {
        where += k + ": " + std::to_string(count) + "; ";
        if (test::is_cuda_impl(k.substr(k.rfind(':') + 1))) on_gpu += count;
      }
      EXPECT_GT(on_gpu, 0) << path << " ran nothing on the GPU: " << where;
    };
    if (ref.int8_ops() == 0) {  // a float model: the GPU sums in another order
      const auto a = ref.run(feeds), b = dev.run(feeds);
      expect_on_gpu();
      for (const auto& [name, t] : a) {
        const double d = test::max_rel_diff(t, b.at(name));
        EXPECT_LE(d, 1e-4) << path << " output " << name;
        std::printf("[cuda] %s (fp32): output %s within %.2e of the reference (relative)\n", path.filename().c_str(),
                    name.c_str(), d);
      std::printf("[cuda] %s (fp32): %s\n", path.filename().c_str(), where.c_str());
      }
      continue;
    }
    const auto a = ref.run(feeds, ref.value_names(), [&](const std::string& v, const Tensor& t) { seen_ref[v] = t.clone(); },
                           Model::WatchLayout::kPlain);
    const auto b = dev.run(feeds, dev.value_names(), [&](const std::string& v, const Tensor& t) { seen_dev[v] = t.clone(); },
                           Model::WatchLayout::kPlain);
    expect_on_gpu();
    ASSERT_EQ(seen_ref.size(), seen_dev.size()) << path;
    for (const auto& [v, t] : seen_ref) {
      const Tensor& u = seen_dev.at(v);
      ASSERT_EQ(t.nbytes(), u.nbytes()) << path << " " << v;
      EXPECT_EQ(std::memcmp(t.raw(), u.raw(), t.nbytes()), 0) << path << " value " << v << " differs";
    }
    int resident = 0, convs = 0;
    for (const auto& c : dev.kernel_report()) {
      resident += c.device_outputs;
      convs += c.op == "QLinearConv";
    }
    if (convs > 1) EXPECT_GE(resident, convs - 1) << path << ": values between GPU kernels must stay on the device";
    for (const auto& [name, t] : a) {
      const Tensor& u = b.at(name);
      ASSERT_EQ(t.nbytes(), u.nbytes()) << path << " " << name;
      EXPECT_EQ(std::memcmp(t.raw(), u.raw(), t.nbytes()), 0) << path << " output " << name << " differs";
    }
    std::printf("[cuda] %s: every value equals the reference; %d nodes keep outputs on the device; %s\n", path.filename().c_str(), resident, where.c_str());
  }
}
