// The runtime on ONNX models exported from PyTorch and on QDQ int8 graphs: outputs
// against PyTorch's, int8 against the float QDQ semantics, errors, threads, taps.
#include <gtest/gtest.h>

#include "../common/scratch_dir.h"
#include "../fuzz/onnx_harness.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include <omp.h>

#include "qfx/error.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/threads.h"
#include "qfx/runtime/npy.h"
#include "qfx/runtime/peak.h"

using namespace qfx::runtime;

namespace {

std::string onnx_dir() { return std::string(QFX_FIXTURE_DIR) + "/onnx/"; }

double max_rel(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double num = 0, den = 1e-12;
  for (int64_t i = 0; i < a.numel(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
    den = std::max(den, std::abs(static_cast<double>(b.data<float>()[i])));
  }
  return num / den;
}

double max_abs(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
  return m;
}

Tensor run1(const Model& m, const Tensor& x) { return m.run({{m.inputs()[0].name, x}}).begin()->second; }

template <typename E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error of the expected type)";
}

}  // namespace

TEST(Runtime, FloatModelsMatchPyTorch) {
  for (const char* name : {"resnet18", "mobilenet_v2", "zoo"}) {
    Tensor x = load_npy(onnx_dir() + name + ".in.npy");
    Tensor ref = load_npy(onnx_dir() + name + ".torch.npy");
    for (const char* backend : {"reference", "onednn"}) {
      ModelOptions o;
      o.backend = backend;
      Model m = Model::load(onnx_dir() + name + ".onnx", o);
      EXPECT_LE(max_rel(run1(m, x), ref), 1e-4) << name << " on " << backend;
    }
  }
}

TEST(Runtime, ProfileTimesEveryRunNodeWhileOn) {
  Model m = Model::load(onnx_dir() + "resnet18.onnx");
  Tensor x = load_npy(onnx_dir() + "resnet18.in.npy");
  run1(m, x);  // not profiled
  int64_t runs = -1;
  EXPECT_TRUE(m.profile(&runs).empty());
  EXPECT_EQ(runs, 0);
  m.set_profiling(true);
  for (int i = 0; i < 3; ++i) run1(m, x);
  m.set_profiling(false);
  run1(m, x);  // not counted: profiling is off; what was collected stays readable
  EXPECT_FALSE(m.profile(&runs).empty());
  EXPECT_EQ(runs, 3);
  m.set_profiling(true);  // starts afresh
  for (int i = 0; i < 3; ++i) run1(m, x);
  const auto prof = m.profile(&runs);
  EXPECT_EQ(runs, 3);
  // One entry per node the plan runs (the kernel report's non-folded nodes), in order.
  std::vector<std::string> ran;
  for (const auto& c : m.kernel_report())
    if (!c.folded) ran.push_back(c.node);
  ASSERT_EQ(prof.size(), ran.size());
  double sum = 0;
  for (size_t i = 0; i < prof.size(); ++i) {
    EXPECT_EQ(prof[i].node, ran[i]);
    EXPECT_FALSE(prof[i].impl.empty());
    EXPECT_GE(prof[i].ms, 0.0);
    sum += prof[i].ms;
  }
  EXPECT_GT(sum, 0.0);
}

TEST(Runtime, DynamicBatchPlansPerShape) {
  Model m = Model::load(onnx_dir() + "resnet18.onnx");
  Tensor x = load_npy(onnx_dir() + "resnet18.in.npy");  // [2, 3, 64, 64]
  Tensor y2 = run1(m, x);
  Tensor x1 = x.view({2, 3, 64, 64}).clone();
  Tensor one({1, 3, 64, 64}, DType::kFloat32);
  std::copy(x.data<float>(), x.data<float>() + one.numel(), one.data<float>());
  Tensor y1 = run1(m, one);
  ASSERT_EQ(y1.shape(), (std::vector<int64_t>{1, 1000}));
  for (int64_t j = 0; j < 1000; ++j) EXPECT_NEAR(y1.data<float>()[j], y2.data<float>()[j], 1e-4);
}

TEST(Runtime, QdqGroupsRunInInt8AndMatchTheFloatQdqSemantics) {
  for (const char* name : {"qdq_convnet", "qdq_s8"}) {
    Tensor x = load_npy(onnx_dir() + name + ".in.npy");
    ModelOptions unfused;
    unfused.fuse_qdq = false;
    unfused.backend = "reference";
    Model f = Model::load(onnx_dir() + name + ".onnx", unfused);
    EXPECT_EQ(f.int8_ops(), 0);
    Tensor ref = run1(f, x);  // ONNX QDQ semantics, op by op in float
    for (const char* backend : {"reference", "onednn"}) {
      ModelOptions o;
      o.backend = backend;
      Model m = Model::load(onnx_dir() + name + ".onnx", o);
      EXPECT_EQ(m.int8_ops(), 5) << "QLinearConv x2, QLinearAdd, QLinearGlobalAveragePool, QGemm";
      EXPECT_TRUE(m.float_fallbacks().empty());
      // Output scale 0.02: at most one output unit apart (integer vs float rounding).
      EXPECT_LE(max_abs(run1(m, x), ref), 0.02 + 1e-6) << name << " on " << backend;
    }
  }
}

// The README's claim, end to end: the onednn backend's int8 outputs equal the
// reference backend's bit for bit, and oneDNN really ran the int8 convolutions
// (the kernel report; no silent fallback to the reference kernels).
TEST(Runtime, OneDnnInt8EqualsTheReferenceArithmetic) {
  for (const char* name : {"qdq_convnet", "qdq_s8"}) {
    Model ref = Model::load(onnx_dir() + name + ".onnx", {"reference"});
    Model dnn = Model::load(onnx_dir() + name + ".onnx", {"onednn"});
    int convs = 0;
    for (const auto& c : dnn.kernel_report()) {
      if (c.op != "QLinearConv") continue;
      ++convs;
      // The only accepted decline: a weight range oneDNN cannot compute exactly on a
      // CPU without VNNI (see int8_kernels_test); the reason says so.
      bool vnni_decline = false;
      for (const auto& d : c.declined) vnni_decline |= d.impl == "onednn" && d.reason.find("without VNNI") != std::string::npos;
      EXPECT_TRUE(c.impl == "onednn" || vnni_decline) << name << ": " << c.node << " ran on " << c.impl;
    }
    EXPECT_EQ(convs, 2) << name;
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.5f);
    for (int rep = 0; rep < 20; ++rep) {
      Tensor x({8, 3, 16, 16}, DType::kFloat32);
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = nd(rng);
      Tensor a = run1(ref, x), b = run1(dnn, x);
      ASSERT_EQ(a.nbytes(), b.nbytes());
      int64_t differ = 0;
      for (int64_t i = 0; i < a.numel(); ++i) differ += a.data<float>()[i] != b.data<float>()[i];
      EXPECT_EQ(differ, 0) << name << " batch " << rep << ": outputs differ from the reference";
    }
  }
}

// A model parsed once plans for several backends and options: each plan gives the
// outputs, int8 op count and kernels of the same file loaded by path, the file is
// parsed once, and a plan does not change the graph the next plan starts from.
TEST(Runtime, ParsedOnceLoadsLikeThePathForEveryBackendAndOption) {
  const std::string path = onnx_dir() + "qdq_convnet.onnx";
  const Tensor x = load_npy(onnx_dir() + "qdq_convnet.in.npy");
  const int64_t parses = Model::parse_count(), loads = Model::load_count();
  const ParsedModel parsed = Model::parse(path);
  EXPECT_EQ(parsed.path(), path);
  std::vector<Model> plans;
  for (const ModelOptions& o : {ModelOptions("onednn"), ModelOptions("onednn", false), ModelOptions("reference"), ModelOptions("onednn")})
    plans.push_back(Model::load(parsed, o));
  EXPECT_EQ(Model::parse_count() - parses, 1);
  EXPECT_EQ(Model::load_count() - loads, 4);
  EXPECT_EQ(plans[0].int8_ops(), 5);
  EXPECT_EQ(plans[1].int8_ops(), 0);
  EXPECT_EQ(plans[2].int8_ops(), 5);
  EXPECT_EQ(plans[3].kernel_impls(), plans[0].kernel_impls());
  const std::vector<const char*> backends = {"onednn", "onednn", "reference", "onednn"};
  for (size_t i = 0; i < plans.size(); ++i) {
    const Model by_path = Model::load(path, {backends[i], i != 1});
    const Tensor a = run1(plans[i], x), b = run1(by_path, x);
    ASSERT_EQ(a.nbytes(), b.nbytes());
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "plan " << i;
    EXPECT_EQ(plans[i].kernel_impls(), by_path.kernel_impls()) << "plan " << i;
  }
  EXPECT_THROW(Model::load(ParsedModel{}, {"onednn"}), qfx::ArgumentError);
  EXPECT_THROW(Model::parse(onnx_dir() + "no_such_model.onnx"), qfx::IoError);
}

TEST(Runtime, BadFilesAndInputsAreClearErrors) {
  EXPECT_NE(error_of<qfx::IoError>([] { Model::load("/nonexistent/model.onnx"); }).find("/nonexistent/model.onnx"),
            std::string::npos);
  const auto tmp = std::filesystem::path(qfx::test::scratch_path());
  {  // truncated
    std::ifstream in(onnx_dir() + "resnet18.onnx", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(tmp / "qfx_truncated.onnx", std::ios::binary) << bytes.substr(0, bytes.size() / 3);
    std::ofstream(tmp / "qfx_text.onnx") << "this is not a model";
  }
  EXPECT_NE(error_of<qfx::IoError>([&] { Model::load((tmp / "qfx_truncated.onnx").string()); }).find("not an ONNX model"),
            std::string::npos);
  EXPECT_NE(error_of<qfx::IoError>([&] { Model::load((tmp / "qfx_text.onnx").string()); }).find("qfx_text.onnx"),
            std::string::npos);
  const std::string un = error_of<qfx::UnsupportedOpError>([] { Model::load(onnx_dir() + "unsupported.onnx"); });
  EXPECT_NE(un.find("det_1"), std::string::npos) << un;
  EXPECT_NE(un.find("'Det'"), std::string::npos) << un;

  Model m = Model::load(onnx_dir() + "zoo.onnx");
  Tensor x = load_npy(onnx_dir() + "zoo.in.npy");
  EXPECT_NE(error_of<qfx::DataError>([&] { m.run({{"image", x}}); }).find("unknown input 'image'"), std::string::npos);
  EXPECT_NE(error_of<qfx::DataError>([&] { m.run({}); }).find("missing input 'input'"), std::string::npos);
  Tensor wrong_dtype(x.shape(), DType::kUInt8);
  EXPECT_NE(error_of<qfx::DataError>([&] { m.run({{"input", wrong_dtype}}); }).find("dtype uint8"), std::string::npos);
  Tensor wrong_shape({2, 3, 15, 16}, DType::kFloat32);
  EXPECT_NE(error_of<qfx::DataError>([&] { m.run({{"input", wrong_shape}}); }).find("[2, 3, 15, 16]"), std::string::npos);
  Tensor wrong_rank({3, 16, 16}, DType::kFloat32);
  EXPECT_THROW(m.run({{"input", wrong_rank}}), qfx::DataError);
}

TEST(Runtime, RunsFromSeveralThreadsAtOnce) {
  Model m = Model::load(onnx_dir() + "mobilenet_v2.onnx");
  Tensor x = load_npy(onnx_dir() + "mobilenet_v2.in.npy");
  Tensor ref = run1(m, x);
  std::vector<std::thread> ts;
  std::vector<double> err(4, 1.0);
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      double e = 0;
      for (int r = 0; r < 3; ++r) e = std::max(e, max_abs(run1(m, x), ref));
      err[static_cast<size_t>(t)] = e;
    });
  for (auto& t : ts) t.join();
  for (double e : err) EXPECT_EQ(e, 0.0);
}

// 8 threads run one int8 model at once, half of them watching values, while the
// main thread changes the taps: outputs stay exactly the single-threaded ones
// (and ThreadSanitizer finds no race: see README, sanitizer builds).
TEST(Runtime, EightThreadsRunOneInt8ModelWithWatchersAndTaps) {
  Model m = Model::load(onnx_dir() + "qdq_convnet.onnx");
  ASSERT_GT(m.int8_ops(), 0);
  Tensor x = load_npy(onnx_dir() + "qdq_convnet.in.npy");
  const Tensor ref = run1(m, x);
  const std::vector<std::string> names = m.value_names();
  int per_run = 0;
  m.run({{m.inputs()[0].name, x}}, names, [&](const std::string&, const Tensor&) { ++per_run; });
  ASSERT_GT(per_run, 3);
  std::atomic<int> done{0};
  std::vector<std::thread> ts;
  std::vector<int> bad(8, -1), seen(8, 0);
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      int differ = 0;
      for (int r = 0; r < 20; ++r) {
        Tensor y = t % 2 ? m.run({{m.inputs()[0].name, x}}, names, [&](const std::string&, const Tensor& v) {
                                    seen[static_cast<size_t>(t)] += v.numel() > 0;
                                  }).begin()->second
                         : run1(m, x);
        differ += max_abs(y, ref) != 0.0;
      }
      bad[static_cast<size_t>(t)] = differ;
      ++done;
    });
  for (int i = 0; done.load() < 8; ++i) {  // taps changed while runs are in flight
    if (i % 3 == 0) m.set_taps({m.inputs()[0].name}, TapKind::kHistogram, TapOptions{128, -5.0f, 5.0f});
    if (i % 3 == 1) m.reset_taps();
    if (i % 3 == 2) m.set_taps({m.inputs()[0].name}, TapKind::kMinMax);
    (void)m.taps();
    std::this_thread::yield();
  }
  for (auto& t : ts) t.join();
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(bad[static_cast<size_t>(t)], 0) << "thread " << t;
    if (t % 2) EXPECT_EQ(seen[static_cast<size_t>(t)], 20 * per_run) << "thread " << t;
  }
  // After the churn, taps set with no run in flight count exactly one run.
  m.set_taps({m.inputs()[0].name}, TapKind::kMinMax);
  run1(m, x);
  EXPECT_EQ(m.taps()[m.inputs()[0].name].count, x.numel());
}

// Inputs the fuzzers found crashing (tests/fuzz/regressions/onnx/, one file per
// finding), through the fuzz target's own harness: each now loads and runs (or is
// skipped as the fuzzer skips inputs over 2^20 elements), or fails with a
// qfx::Error; never a crash.
// Without ModelOptions::max_plan_bytes the limit is this machine's physical memory.
TEST(FuzzRegressions, PlanBeyondPhysicalMemoryIsADataError) {
  const std::string path = std::string(QFX_SOURCE_DIR) + "/tests/fuzz/regressions/onnx/values_need_154gb.onnx";
  try {
    auto m = qfx::runtime::Model::load(path, {"onednn"});
    FAIL() << "loaded a model whose plan needs 154 GB";
  } catch (const qfx::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("more than this machine's memory"), std::string::npos) << e.what();
  }
}

TEST(FuzzRegressions, OnnxInputsFailCleanly) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(QFX_SOURCE_DIR) + "/tests/fuzz/regressions/onnx")) {
    ++files;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::string outcome;
    try {
      outcome = qfx::fuzz::load_and_run_onnx(bytes, e.path().string()) ? "ran" : "skipped (inputs too large)";
    } catch (const qfx::Error& err) {
      outcome = err.what();
      if (e.path().filename() == "dequantize_scale_dtype.onnx") {  // the README's error row: exit 6, the node
        EXPECT_EQ(err.exit_code(), 6) << outcome;
        EXPECT_NE(outcome.find("DequantizeLinear 'c1_w': scale is"), std::string::npos) << outcome;
      }
      if (e.path().filename() == "conv_transpose_short_attrs.onnx" || e.path().filename() == "conv_fp32_short_attrs_onednn.onnx") {
        EXPECT_EQ(err.exit_code(), 6) << outcome;  // the reference names the node; oneDNN declined instead of reading past
        EXPECT_NE(outcome.find("Conv"), std::string::npos) << outcome;
      }
      if (e.path().filename() == "values_need_154gb.onnx") {  // was a 154 GB arena allocation (see also below)
        EXPECT_EQ(err.exit_code(), 6) << outcome;
        EXPECT_NE(outcome.find("ModelOptions::max_plan_bytes"), std::string::npos) << outcome;
      }
      if (e.path().filename() == "reshape_overflow.onnx") {  // was a signed overflow in the shape's product
        EXPECT_EQ(err.exit_code(), 6) << outcome;
        EXPECT_NE(outcome.find("Reshape"), std::string::npos) << outcome;
      }
      if (e.path().filename() == "resize_huge_scale.onnx") {  // was an undefined float -> int64 conversion
        EXPECT_EQ(err.exit_code(), 6) << outcome;
        EXPECT_NE(outcome.find("scales must be positive"), std::string::npos) << outcome;
      }
      if (e.path().filename() == "plan_9_6gb.onnx") {  // a legitimate 9.6 GB plan, refused by the harness's 1 GiB limit
        EXPECT_EQ(err.exit_code(), 6) << outcome;
        EXPECT_NE(outcome.find("ModelOptions::max_plan_bytes"), std::string::npos) << outcome;
      }
      if (e.path().filename() == "slice_short_ends.onnx") {  // was a read past the ends
        EXPECT_EQ(err.exit_code(), 6) << outcome;
        EXPECT_NE(outcome.find("the counts must match"), std::string::npos) << outcome;
      }
      if (e.path().filename() == "arena_offset_overflow.onnx") {  // was a negative dim wrapping the arena offset
        EXPECT_EQ(err.exit_code(), 6) << outcome;
        EXPECT_NE(outcome.find("is negative or too large"), std::string::npos) << outcome;
      }
      if (e.path().filename() == "quantize_input_dtype.onnx") {  // was a uint8 input read as float (heap overflow)
        EXPECT_EQ(err.exit_code(), 6) << outcome;
        EXPECT_NE(outcome.find("QuantizeLinear takes float32"), std::string::npos) << outcome;
      }
      if (e.path().filename() == "add_with_one_input.onnx") {  // was a heap overflow in broadcasting
        EXPECT_EQ(err.exit_code(), 6) << outcome;
        EXPECT_NE(outcome.find("inputs, has 1"), std::string::npos) << outcome;
      }
      if (e.path().filename() == "node_without_output.onnx") {  // was std::out_of_range escaping the loader
        EXPECT_EQ(err.exit_code(), 6) << outcome;
        EXPECT_NE(outcome.find("has no output"), std::string::npos) << outcome;
      }
      if (e.path().filename() == "huge_initializer.onnx") {  // dims claim 12.7 GB: refused before allocating
        EXPECT_EQ(err.exit_code(), 7) << outcome;
        EXPECT_NE(outcome.find("bytes, expected"), std::string::npos) << outcome;
      }
    }
    if (e.path().filename() == "maxpool_1d_onednn.onnx")  // a 1-D MaxPool: oneDNN's pooling read a 4th dim; now declined, the reference runs it
      EXPECT_EQ(outcome, "ran");
    std::cout << e.path().filename().string() << ": " << outcome << "\n";
  }
  EXPECT_GE(files, 1);
}

// The plan cache keeps the most recently used input shapes only.
TEST(Runtime, PlanCacheIsBoundedLeastRecentlyUsed) {
  ModelOptions o("onednn");
  o.plan_cache_size = 2;
  Model m = Model::load(onnx_dir() + "resnet18.onnx", o);
  Tensor x = load_npy(onnx_dir() + "resnet18.in.npy");  // [2, 3, 64, 64]
  const Tensor y2 = run1(m, x);
  auto batch = [&](int64_t n) {
    Tensor b({n, 3, 64, 64}, DType::kFloat32);
    for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = x.data<float>()[i % x.numel()];
    return b;
  };
  run1(m, batch(3));
  run1(m, batch(4));
  EXPECT_EQ(m.cached_plans(), (std::vector<std::string>{"[4, 3, 64, 64]", "[3, 3, 64, 64]"}));
  const Tensor again = run1(m, x);  // evicted, rebuilt, same result
  EXPECT_EQ(max_abs(again, y2), 0.0);
  EXPECT_EQ(m.cached_plans(), (std::vector<std::string>{"[2, 3, 64, 64]", "[4, 3, 64, 64]"}));
  o.plan_cache_size = 0;
  EXPECT_THROW(Model::load(onnx_dir() + "resnet18.onnx", o), qfx::ConfigError);
}

TEST(Runtime, TapsCollectMinMaxAndHistograms) {
  Model m = Model::load(onnx_dir() + "zoo.onnx", {"reference"});
  Tensor x = load_npy(onnx_dir() + "zoo.in.npy");
  m.set_taps({"input", "output"}, TapKind::kMinMax);
  Tensor y = run1(m, x);
  auto stats = m.taps();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats["output"].min, *std::min_element(y.data<float>(), y.data<float>() + y.numel()));
  EXPECT_EQ(stats["output"].max, *std::max_element(y.data<float>(), y.data<float>() + y.numel()));
  EXPECT_EQ(stats["input"].count, x.numel());
  run1(m, x);
  EXPECT_EQ(m.taps()["input"].count, 2 * x.numel()) << "statistics accumulate over runs";
  m.set_taps({"input"}, TapKind::kHistogram, TapOptions{64, -4.0f, 4.0f});
  run1(m, x);
  auto hist_stats = m.taps();
  const auto& h = hist_stats["input"].histogram;
  ASSERT_EQ(h.size(), 64u);
  double total = 0;
  for (double c : h) total += c;
  EXPECT_EQ(total, static_cast<double>(x.numel()));
  m.set_taps({"input"}, TapKind::kPerChannelMinMax);
  run1(m, x);
  auto pc = m.taps()["input"];
  ASSERT_EQ(pc.channel_min.size(), 3u);
  float c1min = INFINITY;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 256; ++i) c1min = std::min(c1min, x.data<float>()[(n * 3 + 1) * 256 + i]);
  EXPECT_EQ(pc.channel_min[1], c1min);
  EXPECT_THROW(m.set_taps({"no_such_tensor"}, TapKind::kMinMax), qfx::DataError);
}

// Histogram taps count every value into its bin in one pass over the tensor (split
// over threads above 32,768 values): checked bin by bin against a plain count in
// double, on values that are multiples of 1/1024 (every bin edge and product exact),
// edges, out-of-range values and NaN included.
TEST(Runtime, HistogramTapsCountEveryValueInItsBin) {
  Model m = Model::load(onnx_dir() + "resnet18.onnx", {"onednn"});
  Tensor x({4, 3, 64, 64}, DType::kFloat32);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  float* v = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) v[i] = std::round(nd(rng) * 1024.0f) / 1024.0f;
  for (int64_t i = 0; i < 64; ++i) v[i * 700] = -4.0f + 0.125f * static_cast<float>(i);  // every lower bin edge
  v[5] = 4.0f;
  v[6] = -100.0f;
  v[7] = 100.0f;
  v[8] = std::nanf("");
  v[9] = 0.0f;
  const int64_t bins = 64;
  std::vector<double> want(bins, 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t b = std::isnan(v[i]) ? 0 : static_cast<int64_t>(std::floor((static_cast<double>(v[i]) + 4.0) * 8.0));
    want[static_cast<size_t>(std::min(std::max(b, int64_t{0}), bins - 1))] += 1.0;
  }
  m.set_taps({"input"}, TapKind::kHistogram, TapOptions{bins, -4.0f, 4.0f});
  run1(m, x);
  run1(m, x);
  const TapStats s = m.taps()["input"];
  ASSERT_EQ(s.histogram.size(), static_cast<size_t>(bins));
  for (int64_t b = 0; b < bins; ++b) EXPECT_EQ(s.histogram[static_cast<size_t>(b)], 2.0 * want[static_cast<size_t>(b)]) << "bin " << b;
  EXPECT_EQ(s.min, -100.0f);
  EXPECT_EQ(s.max, 100.0f);
  EXPECT_EQ(s.count, 2 * x.numel());
}

// On the onednn backend, float values between convolutions are stored channels last.
// What users see must not change: per-channel taps and watched values are per the
// logical NCHW layout, identical to the reference backend's plain tensors.
TEST(Runtime, ChannelsLastValuesLookPlainToTapsAndWatchers) {
  Tensor x = load_npy(onnx_dir() + "resnet18.in.npy");
  Model fast = Model::load(onnx_dir() + "resnet18.onnx", {"onednn"});
  Model ref = Model::load(onnx_dir() + "resnet18.onnx", {"reference"});
  std::vector<std::string> names = fast.value_names();
  std::map<std::string, Tensor> want;
  ref.run({{ref.inputs()[0].name, x}}, names, [&](const std::string& n, const Tensor& t) { want[n] = t.clone(); });
  fast.set_taps(names, TapKind::kPerChannelMinMax);
  int compared = 0;
  fast.run({{fast.inputs()[0].name, x}}, names, [&](const std::string& n, const Tensor& t) {
    ASSERT_TRUE(want.count(n)) << n;
    if (t.shape().size() != 4) return;
    EXPECT_LE(max_rel(t, want[n]), 1e-4) << n << ": watched value differs from the reference's";
    ++compared;
  });
  EXPECT_GT(compared, 20);
  auto taps = fast.taps();
  for (const auto& kv : want) {
    const Tensor& t = kv.second;
    if (t.shape().size() != 4) continue;
    const int64_t N = t.shape()[0], C = t.shape()[1], HW = t.shape()[2] * t.shape()[3];
    const auto& got = taps.at(kv.first);
    ASSERT_EQ(static_cast<int64_t>(got.channel_max.size()), C) << kv.first;
    for (int64_t c = 0; c < C; ++c) {
      float hi = -INFINITY;
      for (int64_t b = 0; b < N; ++b)
        for (int64_t i = 0; i < HW; ++i) hi = std::max(hi, t.data<float>()[(b * C + c) * HW + i]);
      EXPECT_NEAR(got.channel_max[static_cast<size_t>(c)], hi, 1e-4 * (1.0 + std::abs(hi))) << kv.first << " channel " << c;
    }
  }
}

TEST(Runtime, KeptValuesWatchedInTheirStoredLayout) {
  // Calibration watches every observed value; with keep_values_any_layout they stay
  // channels last and arrive as stored: the same values (as multisets, up to the
  // float rounding of oneDNN's kernels for the other layout) as the plain layout, in
  // another order for the values the convolutions pass channels last.
  Tensor x = load_npy(onnx_dir() + "resnet18.in.npy");
  Model probe = Model::load(onnx_dir() + "resnet18.onnx", {"onednn"});
  std::vector<std::string> names;
  for (const auto& n : probe.value_names()) names.push_back(n);
  auto watch_all = [&](bool any_layout) {
    ModelOptions o("onednn");
    o.keep_values = names;
    o.keep_values_any_layout = any_layout;
    Model m = Model::load(onnx_dir() + "resnet18.onnx", o);
    std::map<std::string, std::vector<float>> got;
    m.run({{m.inputs()[0].name, x}}, names, [&](const std::string& n, const Tensor& t) {
      if (t.dtype() == DType::kFloat32) got[n].assign(t.data<float>(), t.data<float>() + t.numel());
    });
    return got;
  };
  auto plain = watch_all(false), stored = watch_all(true);
  ASSERT_EQ(plain.size(), stored.size());
  int reordered = 0;
  for (auto& [n, p] : plain) {
    std::vector<float>& s = stored.at(n);
    ASSERT_EQ(p.size(), s.size()) << n;
    if (p != s) ++reordered;
    std::sort(p.begin(), p.end());
    std::sort(s.begin(), s.end());
    float worst = 0, scale = 1;
    for (size_t i = 0; i < p.size(); ++i) {
      worst = std::max(worst, std::abs(p[i] - s[i]));
      scale = std::max(scale, std::abs(p[i]));
    }
    EXPECT_LE(worst, 1e-5f * scale) << n << ": the values differ, not only their order";
  }
  EXPECT_GT(reordered, 10) << "the convolutions' values should stay channels last";
}

TEST(Runtime, MultiplyAccumulatesMatchPyTorchHooksAndHandCounts) {
  // Independent counts: torchvision models with forward hooks on every Conv2d and
  // Linear (numel(output) x weights per output channel, numel(output) x in_features),
  // batch 2 at 224x224, PyTorch 1.13 / torchvision 0.14.
  const std::string bench = std::string(QFX_FIXTURE_DIR) + "/bench/";
  EXPECT_EQ(Model::load(bench + "resnet18.onnx").multiply_accumulates({{2, 3, 224, 224}}), 3628146688LL);
  EXPECT_EQ(Model::load(bench + "mobilenet_v2.onnx").multiply_accumulates({{2, 3, 224, 224}}), 601548544LL);
  // The int8 QDQ fixture by hand, per image: conv 3->8 3x3 on 16x16 (8*16*16*27),
  // conv 8->8 3x3 on 8x8 (8*8*8*72), gemm 8->5 (5*8): the same matched into
  // QLinearConv / QGemm or run as float Conv / Gemm.
  for (bool fuse : {true, false}) {
    ModelOptions o("onednn", fuse);
    Model m = Model::load(onnx_dir() + "qdq_convnet.onnx", o);
    EXPECT_EQ(m.multiply_accumulates({{3, 3, 16, 16}}), 3 * (8 * 16 * 16 * 27 + 8 * 8 * 8 * 72 + 5 * 8)) << fuse;
  }
  EXPECT_THROW(Model::load(onnx_dir() + "qdq_convnet.onnx").multiply_accumulates({}), qfx::DataError);
}

TEST(Runtime, MeasurePeakTimesOneDnnMatmuls) {
  const qfx::runtime::Peak p = qfx::runtime::measure_peak(256, 1);
  EXPECT_GT(p.fp32_gflops, 0.0);
  EXPECT_GT(p.int8_gops, 0.0);
  EXPECT_GT(p.read_gbps, 0.0);
  EXPECT_GE(p.threads, 1);
  EXPECT_EQ(p.size, 256);
  EXPECT_FALSE(p.fp32_impl.empty());
  EXPECT_FALSE(p.int8_impl.empty());
  EXPECT_THROW(qfx::runtime::measure_peak(8, 1), qfx::ArgumentError);
  EXPECT_THROW(qfx::runtime::measure_peak(256, 0), qfx::ArgumentError);
}

// The runtime's thread count is settable without libtorch, and bad counts are refused.
TEST(Runtime, SetNumThreadsSizesThePool) {
  const int before = qfx::runtime::num_threads();
  qfx::runtime::set_num_threads(1);
  EXPECT_EQ(qfx::runtime::num_threads(), 1);
  int in_region = 0;
#pragma omp parallel
  {
#pragma omp single
    in_region = omp_get_num_threads();
  }
  EXPECT_EQ(in_region, 1);
  qfx::runtime::set_num_threads(2);
  EXPECT_EQ(qfx::runtime::num_threads(), 2);
  EXPECT_THROW(qfx::runtime::set_num_threads(0), qfx::ArgumentError);
  qfx::runtime::set_num_threads(before);
}
