// The statistics library (qfx/stats) and the runtime's taps that feed it: per-channel
// ranges read channels-last values in place, the growing histogram keeps every value in
// the bin of its final grid, and statistics made by a TapFactory see each value as
// stored or plain, as asked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "qfx/error.h"
#include "qfx/runtime/cuda.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/npy.h"
#include "qfx/stats/histogram.h"
#include "qfx/stats/min_max.h"

using namespace qfx;
using qfx::runtime::Model;
using qfx::runtime::Tensor;

namespace {

std::string onnx_dir() { return std::string(QFX_FIXTURE_DIR) + "/onnx/"; }

// x [N, C, H, W] stored with C innermost.
std::vector<float> to_nhwc(const std::vector<float>& x, const std::vector<int64_t>& s) {
  std::vector<float> y(x.size());
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < HW; ++p) y[static_cast<size_t>((n * HW + p) * C + c)] = x[static_cast<size_t>((n * C + c) * HW + p)];
  return y;
}

// Records copies of what it is shown.
struct Recorder : stats::Statistic {
  std::vector<stats::FloatView> views;
  std::vector<std::vector<float>> data;
  void observe(const stats::FloatView& v) override {
    views.push_back(v);
    data.emplace_back(v.data, v.data + v.numel());
  }
};

}  // namespace

// Per-channel min and max along every axis, from the plain layout and from the
// channels-last one read in place, against a brute-force scan.
TEST(StatsLibrary, ChannelMinMaxReadsChannelsLastInPlace) {
  const std::vector<int64_t> shape{2, 5, 3, 4};
  std::vector<float> x(120);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (float& v : x) v = nd(rng);
  const std::vector<float> nhwc = to_nhwc(x, shape);
  for (int64_t axis : {0, 1, 2, 3, -1}) {
    const int64_t a = axis < 0 ? axis + 4 : axis;
    std::vector<float> want_lo(static_cast<size_t>(shape[static_cast<size_t>(a)]), INFINITY), want_hi(want_lo.size(), -INFINITY);
    for (int64_t i = 0; i < 120; ++i) {
      const int64_t idx[4] = {i / 60, i / 12 % 5, i / 4 % 3, i % 4};
      float& lo = want_lo[static_cast<size_t>(idx[a])];
      float& hi = want_hi[static_cast<size_t>(idx[a])];
      lo = std::min(lo, x[static_cast<size_t>(i)]);
      hi = std::max(hi, x[static_cast<size_t>(i)]);
    }
    std::vector<float> lo, hi;
    stats::channel_min_max(stats::FloatView{x.data(), shape, false, "x"}, axis, &lo, &hi);
    EXPECT_EQ(lo, want_lo) << "axis " << axis;
    EXPECT_EQ(hi, want_hi) << "axis " << axis;
    stats::channel_min_max(stats::FloatView{nhwc.data(), shape, true, "x"}, axis, &lo, &hi);
    EXPECT_EQ(lo, want_lo) << "axis " << axis << ", channels last";
    EXPECT_EQ(hi, want_hi) << "axis " << axis << ", channels last";
  }
  std::vector<float> lo, hi;
  EXPECT_THROW(stats::channel_min_max(stats::FloatView{x.data(), shape, false, "x"}, 4, &lo, &hi), DataError);
}

TEST(StatsLibrary, NonFiniteValuesAreRefusedNamingTheTensor) {
  std::vector<float> x{1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f, 2.0f};
  float lo, hi;
  try {
    stats::checked_min_max(x.data(), 4, "conv1_out", &lo, &hi);
    FAIL() << "NaN accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("'conv1_out' contains NaN or Inf"), std::string::npos) << e.what();
  }
  x[1] = INFINITY;
  std::vector<float> clo, chi;
  EXPECT_THROW(stats::channel_min_max(stats::FloatView{x.data(), {2, 2}, false, "t"}, 1, &clo, &chi), DataError);
  stats::Histogram growing(64);
  EXPECT_THROW(growing.observe(stats::FloatView{x.data(), {4}, false, "t"}), DataError);
  stats::Histogram fixed(4, 0.0f, 4.0f);  // a fixed range counts everything
  fixed.observe(stats::FloatView{x.data(), {4}, false, "t"});
  EXPECT_EQ(fixed.counts, (std::vector<double>{0, 1, 1, 2}));
}

// A growing histogram over tensors whose range triples: the first grid is exact (span 8
// over 2048 bins, width 2^-8) and the values multiples of 2^-10, so every value's bin on
// the final grid is exactly floor((x - lo) / width); the counts must equal that count.
TEST(StatsLibrary, GrowingHistogramKeepsEveryValueInItsFinalBin) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  stats::Histogram h(2048);
  std::vector<float> all;
  float scale = 1.0f;
  for (int step = 0; step < 4; ++step, scale *= 3.0f) {
    std::vector<float> x(50000);
    for (float& v : x) v = std::clamp(std::round(nd(rng) * 1024.0f) / 1024.0f, -4.0f, 4.0f) * scale;
    x[0] = -4.0f * scale;
    x[1] = 4.0f * scale;
    h.observe(stats::FloatView{x.data(), {static_cast<int64_t>(x.size())}, false, "x"});
    all.insert(all.end(), x.begin(), x.end());
  }
  std::vector<double> want(2048, 0.0);
  for (float v : all) {
    const double b = std::floor((static_cast<double>(v) - h.range[0]) / h.range[1]);
    want[static_cast<size_t>(std::clamp(b, 0.0, 2047.0))] += 1;
  }
  EXPECT_EQ(h.counts, want);
  EXPECT_EQ(h.count, static_cast<int64_t>(all.size()));
  EXPECT_EQ(h.min, -108.0f);
  EXPECT_EQ(h.max, 108.0f);
  EXPECT_LE(h.range[0], -108.0);
  EXPECT_GE(h.range[0] + 2048 * h.range[1], 108.0);
}

// observe_known_range (the device path: the exact extremes first, then one count on the
// grid they give) records what observe records, batch after batch, as the grid grows
// and as values fall inside it; kGpu / kGpuResident without a GPU throw ExecutionError.
TEST(StatsLibrary, ObserveWithKnownRangeEqualsObserve) {
  constexpr int64_t kBins = 512;
  struct State {
    std::vector<double> counts = std::vector<double>(kBins, 0.0);
    double range[2] = {0, 0};
    float mn = INFINITY, mx = -INFINITY;
    stats::LatticeHistogram lattice;
    stats::HistogramBuffers b() { return {counts.data(), kBins, range, &mn, &mx}; }
  } a, k;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int step = 0; step < 6; ++step) {
    std::vector<float> x(20000);
    const float scale = step == 3 ? 1e-3f : std::pow(2.5f, static_cast<float>(step));  // grows, then falls inside
    for (float& v : x) v = nd(rng) * scale + static_cast<float>(step);
    a.lattice.observe(a.b(), x.data(), static_cast<int64_t>(x.size()), "x");
    const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
    k.lattice.observe_known_range(k.b(), x.data(), static_cast<int64_t>(x.size()), *lo, *hi,
                                  stats::LatticeHistogram::CountOn::kCpu);
    ASSERT_EQ(a.counts, k.counts) << "step " << step;
    ASSERT_TRUE(a.range[0] == k.range[0] && a.range[1] == k.range[1] && a.mn == k.mn && a.mx == k.mx) << "step " << step;
  }
  if (qfx::runtime::cuda_unavailable_reason().empty()) return;  // a GPU here: CudaHistogram.* count on it
  const float v[2] = {0.0f, 1.0f};
  for (auto where : {stats::LatticeHistogram::CountOn::kGpu, stats::LatticeHistogram::CountOn::kGpuResident})
    EXPECT_THROW(k.lattice.observe_known_range(k.b(), v, 2, 0.0f, 1.0f, where), ExecutionError);
}

// Statistics made by a TapFactory: on the onednn backend the values between
// convolutions are stored channels last; kAsStored hands them so (channels_last set,
// the NHWC bytes of the plain value), kPlain reordered; clear_taps stops them.
TEST(Taps, FactoryStatisticsSeeValuesAsStoredOrPlain) {
  Model ref = Model::load(onnx_dir() + "resnet18.onnx", {"reference"});
  Model fast = Model::load(onnx_dir() + "resnet18.onnx", {"onednn"});
  const Tensor x = runtime::load_npy(onnx_dir() + "resnet18.in.npy");
  const std::vector<std::string> names = fast.value_names();
  std::map<std::string, Tensor> plain;
  ref.run({{ref.inputs()[0].name, x}}, names, [&](const std::string& n, const Tensor& t) { plain[n] = t.clone(); });
  for (auto layout : {Model::WatchLayout::kAsStored, Model::WatchLayout::kPlain}) {
    std::map<std::string, std::shared_ptr<Recorder>> rec;
    fast.set_taps(names, [&](const std::string& n) { return rec[n] = std::make_shared<Recorder>(); }, layout);
    fast.run({{fast.inputs()[0].name, x}});
    int channels_last = 0;
    for (const auto& kv : rec) {
      ASSERT_EQ(kv.second->views.size(), 1u) << kv.first;
      const stats::FloatView& v = kv.second->views[0];
      const Tensor& want = plain.at(kv.first);
      ASSERT_EQ(v.shape, want.shape()) << kv.first;
      EXPECT_EQ(v.name, kv.first);
      std::vector<float> w(want.data<float>(), want.data<float>() + want.numel());
      if (v.channels_last) {
        ++channels_last;
        w = to_nhwc(w, want.shape());
      }
      double worst = 0, top = 1e-12;
      for (size_t i = 0; i < w.size(); ++i) {
        worst = std::max(worst, std::abs(static_cast<double>(kv.second->data[0][i]) - w[i]));
        top = std::max(top, std::abs(static_cast<double>(w[i])));
      }
      EXPECT_LE(worst / top, 1e-4) << kv.first << (v.channels_last ? " (channels last)" : "");
    }
    if (layout == Model::WatchLayout::kAsStored) EXPECT_GT(channels_last, 20);
    else EXPECT_EQ(channels_last, 0);
    fast.clear_taps();
    fast.run({{fast.inputs()[0].name, x}});
    for (const auto& kv : rec) EXPECT_EQ(kv.second->views.size(), 1u) << kv.first << " observed after clear_taps";
  }
}

// Teacher forcing: run_replacing hands a value stored channels last to the replacer
// in the plain layout (equal to the reference backend's value) and stores what the
// replacer leaves back in the stored layout. Replacing the last 4-D value of
// resnet18 (all that the head reads) with the value another input gives there makes
// the model's output that input's output.
TEST(Taps, RunReplacingFeedsLaterNodesTheReplacement) {
  Model ref = Model::load(onnx_dir() + "resnet18.onnx", {"reference"});
  Model fast = Model::load(onnx_dir() + "resnet18.onnx", {"onednn"});
  const Tensor x = runtime::load_npy(onnx_dir() + "resnet18.in.npy");
  Tensor x2 = x.clone();
  for (int64_t i = 0; i < x2.numel(); ++i) x2.data<float>()[i] = 0.5f - x2.data<float>()[i];
  const std::string in = fast.inputs()[0].name;
  const std::vector<std::string> names = fast.value_names();
  std::map<std::string, Tensor> v1, v2;
  ref.run({{in, x}}, names, [&](const std::string& n, const Tensor& t) { v1[n] = t.clone(); });
  const auto want = ref.run({{in, x2}}, names, [&](const std::string& n, const Tensor& t) { v2[n] = t.clone(); });
  std::string last4d;
  for (const auto& n : names)
    if (v1.at(n).shape().size() == 4) last4d = n;
  ASSERT_FALSE(last4d.empty());
  int calls = 0;
  double seen_err = 0;
  const auto got = fast.run_replacing(
      {{in, x}}, {last4d},
      [&](const std::string& n, Tensor& t) {
        ++calls;
        ASSERT_EQ(n, last4d);
        ASSERT_EQ(t.shape(), v1.at(n).shape());
        for (int64_t i = 0; i < t.numel(); ++i)
          seen_err = std::max(seen_err, std::abs(static_cast<double>(t.data<float>()[i]) - v1.at(n).data<float>()[i]));
        std::memcpy(t.raw(), v2.at(n).raw(), t.nbytes());
      },
      {}, [](const std::string&, const Tensor&) {});
  EXPECT_EQ(calls, 1);
  EXPECT_LE(seen_err, 1e-3);  // the plain layout of the computed value
  const Tensor& a = got.begin()->second;
  const Tensor& b = want.begin()->second;
  ASSERT_EQ(a.numel(), b.numel());
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
  EXPECT_LE(worst, 1e-3);
  const auto again = fast.run({{in, x}}), plain_run = ref.run({{in, x}});  // the plan is unchanged by the replacement
  double drift = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    drift = std::max(drift, std::abs(static_cast<double>(again.begin()->second.data<float>()[i]) -
                                     plain_run.begin()->second.data<float>()[i]));
  EXPECT_LE(drift, 1e-3);
  auto nothing = [](const std::string&, Tensor&) {};
  EXPECT_THROW(fast.run_replacing({{in, x}}, {in}, nothing, {}, [](const std::string&, const Tensor&) {}), DataError);
  EXPECT_THROW(fast.run_replacing({{in, x}}, {"no_such_value"}, nothing, {}, [](const std::string&, const Tensor&) {}), DataError);
}
