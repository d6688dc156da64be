// Observers, qparams, calibration algorithms and FakeQuantize against torch.ao's
// results recorded by tools/fixtures/export_quant_expectations.py.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/serialize.h>
#include <ATen/ATen.h>

#include <cmath>
#include <random>

#include "qfx/error.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/observer.h"

using namespace qfx::quant;

namespace {

torch::jit::Module& expect() {
  static torch::jit::Module m = torch::jit::load(std::string(QFX_FIXTURE_DIR) + "/quant_expect.pt");
  return m;
}
at::Tensor T(const std::string& name) { return expect().attr(name).toTensor(); }
std::vector<at::Tensor> batches() { return {T("b0"), T("b1"), T("b2")}; }

QuantSpec spec(QDType d, QScheme s, int bits = 8) { return QuantSpec::make(d, s, bits); }

void expect_qparams(const QParams& q, const std::string& name) {
  at::Tensor es = T(name + "_scale").reshape(q.scale.sizes());
  at::Tensor ez = T(name + "_zp").reshape(q.zero_point.sizes());
  EXPECT_TRUE(at::equal(q.scale, es)) << name << ": scale " << q.scale << " vs torch.ao " << es;
  EXPECT_TRUE(at::equal(q.zero_point.to(at::kInt), ez)) << name << ": zero_point " << q.zero_point << " vs " << ez;
}

struct Case {
  const char* name;
  QDType dtype;
  QScheme scheme;
  int bits;
};
const Case kPerTensor[] = {
    {"minmax_u8_affine", QDType::kUInt8, QScheme::kAffine, 8},
    {"minmax_s8_symmetric", QDType::kInt8, QScheme::kSymmetric, 8},
    {"minmax_u8_symmetric", QDType::kUInt8, QScheme::kSymmetric, 8},
    {"minmax_s8_affine", QDType::kInt8, QScheme::kAffine, 8},
    {"minmax_s4_symmetric", QDType::kInt8, QScheme::kSymmetric, 4},
    {"minmax_u4_affine", QDType::kUInt8, QScheme::kAffine, 4},
};

}  // namespace

TEST(Observer, MinMaxMatchesTorchAo) {
  for (const auto& c : kPerTensor) {
    MinMaxObserver obs(spec(c.dtype, c.scheme, c.bits));
    for (const auto& b : batches()) obs.forward(b);
    expect_qparams(obs.calculate_qparams(), c.name);
  }
}

TEST(Observer, MovingAverageMinMaxMatchesTorchAo) {
  for (const auto& c : kPerTensor) {
    MovingAverageMinMaxObserver obs(spec(c.dtype, c.scheme, c.bits), 0.1);
    for (const auto& b : batches()) obs.forward(b);
    expect_qparams(obs.calculate_qparams(), std::string("ma_") + c.name);
  }
}

TEST(Observer, AllZeroTensorGetsEpsScale) {
  MinMaxObserver obs(spec(QDType::kUInt8, QScheme::kAffine));
  obs.forward(at::zeros({3, 4}));
  auto q = obs.calculate_qparams();
  expect_qparams(q, "minmax_zeros");
  EXPECT_GT(q.scale.item<float>(), 0.0f);
}

TEST(Observer, PerChannelMatchesTorchAo) {
  auto mk = [](QDType d, QScheme s, int64_t axis, int bits = 8) {
    QuantSpec q = QuantSpec::make(d, s, bits);
    q.per_channel = true;
    q.ch_axis = axis;
    return q;
  };
  {
    PerChannelMinMaxObserver o(mk(QDType::kInt8, QScheme::kSymmetric, 0));
    o.forward(T("w"));
    auto q = o.calculate_qparams();
    expect_qparams(q, "pc0_s8_symmetric");
    EXPECT_GT(q.scale[4].item<float>(), 0.0f) << "all-zero channel must get a valid scale";
  }
  {
    PerChannelMinMaxObserver o(mk(QDType::kUInt8, QScheme::kAffine, 0));
    o.forward(T("w"));
    expect_qparams(o.calculate_qparams(), "pc0_u8_affine");
  }
  {
    PerChannelMinMaxObserver o(mk(QDType::kInt8, QScheme::kSymmetric, 0, 4));
    o.forward(T("w"));
    expect_qparams(o.calculate_qparams(), "pc0_s4_symmetric");
  }
  {
    PerChannelMinMaxObserver o(mk(QDType::kUInt8, QScheme::kAffine, 1));
    for (const auto& b : batches()) o.forward(b);
    expect_qparams(o.calculate_qparams(), "pc1_u8_affine");
  }
  {
    MovingAveragePerChannelMinMaxObserver o(mk(QDType::kInt8, QScheme::kSymmetric, 1), 0.1);
    for (const auto& b : batches()) o.forward(b);
    expect_qparams(o.calculate_qparams(), "mapc1_s8_symmetric");
  }
}

TEST(Observer, NaNAndInfAreDataErrorsNamingTheTensor) {
  MinMaxObserver o(spec(QDType::kUInt8, QScheme::kAffine));
  o.set_tensor_name("layer1_0_relu");
  at::Tensor x = at::randn({10});
  x[3] = std::nan("");
  try {
    o.forward(x);
    FAIL() << "expected DataError";
  } catch (const qfx::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("layer1_0_relu"), std::string::npos) << e.what();
  }
  HistogramObserver h(spec(QDType::kUInt8, QScheme::kAffine));
  h.set_tensor_name("conv1");
  x[3] = INFINITY;
  EXPECT_THROW(h.forward(x), qfx::DataError);
  at::Tensor y = at::randn({10});
  y[7] = std::nan("");
  EXPECT_THROW(h.forward(y), qfx::DataError);
  // Once a grid exists, counting and scanning share one pass: a tensor with NaN
  // or Inf still raises, and adds nothing (100,000 values: the threaded pass).
  h.forward(at::randn({1000}));
  const Histogram before = h.histogram();
  at::Tensor z = at::randn({100000}) * 0.5;
  z[54321] = std::nan("");
  z[99999] = -INFINITY;
  EXPECT_THROW(h.forward(z), qfx::DataError);
  const Histogram after = h.histogram();
  EXPECT_EQ(after.counts, before.counts);
  EXPECT_EQ(after.lo, before.lo);
  EXPECT_EQ(after.min, before.min);
}

TEST(QParams, PowerOfTwoAndBounds) {
  QuantSpec s = QuantSpec::make(QDType::kInt8, QScheme::kSymmetric);
  s.power_of_two = true;
  auto q = compute_qparams(at::full({}, -3.0f), at::full({}, 2.0f), s);
  const float sc = q.scale.item<float>();
  EXPECT_EQ(sc, std::exp2(std::ceil(std::log2(3.0f / 127.5f))));
  EXPECT_GE(sc * 127.5f, 3.0f) << "rounded up: the range still covers the data";
  EXPECT_EQ(q.zero_point.item<int>(), 0);
  QuantSpec b = QuantSpec::make(QDType::kUInt8, QScheme::kAffine);
  b.scale_min = 0.01;
  auto q2 = compute_qparams(at::full({}, 0.0f), at::full({}, 0.1f), b);
  EXPECT_FLOAT_EQ(q2.scale.item<float>(), 0.01f);
  EXPECT_THROW(compute_qparams(at::full({}, 1.0f), at::full({}, 0.0f), b), qfx::ArgumentError);
  EXPECT_THROW(QuantSpec::make(QDType::kInt8, QScheme::kSymmetric, 1), qfx::ConfigError);
  auto n = QuantSpec::make(QDType::kInt8, QScheme::kSymmetric, 8, /*narrow_range=*/true);
  EXPECT_EQ(n.quant_min, -127);
  EXPECT_EQ(n.quant_max, 127);
}

// --- histogram ------------------------------------------------------------------

namespace {

// Bins `x` on the grid (lo, width, bins) directly, in double: the expectation for
// exact re-binning.
std::vector<double> direct_histogram(const std::vector<at::Tensor>& xs, double lo, double width, int64_t bins) {
  std::vector<double> h(static_cast<size_t>(bins), 0.0);
  for (const auto& x : xs) {
    auto c = x.contiguous();
    const float* p = c.data_ptr<float>();
    for (int64_t i = 0; i < c.numel(); ++i) {
      int64_t b = static_cast<int64_t>(std::floor((static_cast<double>(p[i]) - lo) / width));
      h[static_cast<size_t>(std::clamp<int64_t>(b, 0, bins - 1))] += 1;
    }
  }
  return h;
}

}  // namespace

TEST(HistogramObserver, GrowingRangeRebinsExactly) {
  at::manual_seed(0);
  std::vector<at::Tensor> xs = {at::rand({5000}) * 2 - 1, at::randn({5000}) * 2 + 1, at::rand({3000}) * 10 - 7};
  HistogramObserver h(spec(QDType::kUInt8, QScheme::kAffine), Algorithm::kMinMax);
  for (const auto& x : xs) h.forward(x);
  Histogram hg = h.histogram();
  ASSERT_EQ(hg.counts.size(), 2048u);
  EXPECT_DOUBLE_EQ(hg.total(), 13000.0);
  float mn = INFINITY, mx = -INFINITY;
  for (const auto& x : xs) {
    mn = std::min(mn, x.min().item<float>());
    mx = std::max(mx, x.max().item<float>());
  }
  EXPECT_EQ(hg.min, mn);
  EXPECT_EQ(hg.max, mx);
  EXPECT_LE(hg.lo, mn);
  EXPECT_GE(hg.lo + 2048 * hg.width, mx);
  // Exact: the same counts as binning all the data on the final grid directly
  // (a value on a bin edge may fall either side through float rounding).
  auto direct = direct_histogram(xs, hg.lo, hg.width, 2048);
  double diff = 0;
  for (size_t i = 0; i < direct.size(); ++i) diff += std::abs(direct[i] - hg.counts[i]);
  EXPECT_LE(diff, 4.0);
}

TEST(HistogramObserver, MergeEqualsObservingEverything) {
  at::manual_seed(1);
  at::Tensor a = at::randn({20000}), b = at::randn({20000}) * 3;
  HistogramObserver all(spec(QDType::kUInt8, QScheme::kAffine), Algorithm::kPercentile);
  all.forward(a);
  all.forward(b);
  HistogramObserver h1(spec(QDType::kUInt8, QScheme::kAffine), Algorithm::kPercentile);
  HistogramObserver h2(spec(QDType::kUInt8, QScheme::kAffine), Algorithm::kPercentile);
  h1.forward(a);
  h2.forward(a);  // same first batch: the grids line up and the merge is exact
  HistogramObserver h3(spec(QDType::kUInt8, QScheme::kAffine), Algorithm::kPercentile);
  h3.forward(b);
  h1.merge(h3);
  EXPECT_NEAR(h1.histogram().total(), 40000.0, 1e-6);
  EXPECT_EQ(h1.min_max().first.item<float>(), all.min_max().first.item<float>());
  EXPECT_EQ(h1.min_max().second.item<float>(), all.min_max().second.item<float>());
  auto r_all = all.clip_range(), r_merged = h1.clip_range();
  const double w = all.histogram().width;
  EXPECT_NEAR(r_all.first.item<float>(), r_merged.first.item<float>(), 2 * w);
  EXPECT_NEAR(r_all.second.item<float>(), r_merged.second.item<float>(), 2 * w);
  (void)h2;
}

// Data-parallel calibration's replay, simulated in one process: `world` ranks, each
// with its own observer; step s holds batches s * world + r. Each step a rank defers
// its batch against the grid it has (the gathered steps before the previous one:
// two steps in flight, as calibrate_lockstep runs), then applies the previous step
// in rank order (its own commit, the others' replay_range). The per-rank counts
// summed must equal one observer fed every batch in order, bit for bit.
static void expect_deferred_replay_exact(const std::vector<at::Tensor>& batches, int world) {
  HistogramObserver single(spec(QDType::kUInt8, QScheme::kAffine), Algorithm::kEntropy, {}, 128);
  for (const auto& b : batches) single.forward(b);
  std::vector<std::unique_ptr<HistogramObserver>> ranks;
  for (int r = 0; r < world; ++r)
    ranks.push_back(std::make_unique<HistogramObserver>(spec(QDType::kUInt8, QScheme::kAffine), Algorithm::kEntropy, AlgorithmOptions{}, 128));
  const int64_t steps = (static_cast<int64_t>(batches.size()) + world - 1) / world;
  std::vector<std::vector<DeferredObservation>> held(static_cast<size_t>(steps), std::vector<DeferredObservation>(static_cast<size_t>(world)));
  std::vector<std::vector<bool>> deferred(static_cast<size_t>(steps), std::vector<bool>(static_cast<size_t>(world)));
  int64_t n_deferred = 0, n_copied = 0;
  auto batch_of = [&](int64_t s, int r) -> const at::Tensor* {
    const size_t i = static_cast<size_t>(s * world + r);
    return i < batches.size() ? &batches[i] : nullptr;
  };
  auto apply = [&](int64_t s) {
    for (int r = 0; r < world; ++r)      // this rank
      for (int j = 0; j < world; ++j) {  // the step's batches in order
        const at::Tensor* b = batch_of(s, j);
        if (!b) continue;
        HistogramObserver& o = *ranks[static_cast<size_t>(r)];
        if (j != r) {
          if (b->numel() == 0) continue;  // calibrate_lockstep skips empty ranges too
          o.replay_range(b->min().item<float>(), b->max().item<float>());
        } else if (deferred[static_cast<size_t>(s)][static_cast<size_t>(r)]) {
          o.commit(held[static_cast<size_t>(s)][static_cast<size_t>(r)]);
        } else {
          o.forward(*b);  // the copy
        }
      }
  };
  for (int64_t s = 0; s < steps; ++s) {
    for (int r = 0; r < world; ++r) {
      const at::Tensor* b = batch_of(s, r);
      if (!b) continue;
      const bool ok = ranks[static_cast<size_t>(r)]->defer(*b, &held[static_cast<size_t>(s)][static_cast<size_t>(r)]);
      deferred[static_cast<size_t>(s)][static_cast<size_t>(r)] = ok;
      (ok ? n_deferred : n_copied)++;
    }
    if (s > 0) apply(s - 1);
  }
  apply(steps - 1);
  EXPECT_GT(n_deferred, n_copied) << "the test should exercise deferred observations";
  const Histogram want = single.histogram();
  std::vector<double> sum(want.counts.size(), 0.0);
  for (const auto& o : ranks) {
    const Histogram h = o->histogram();
    EXPECT_EQ(h.lo, want.lo);
    EXPECT_EQ(h.width, want.width);
    EXPECT_EQ(h.min, want.min);
    EXPECT_EQ(h.max, want.max);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += h.counts[i];
  }
  EXPECT_EQ(sum, want.counts) << world << " ranks";
}

TEST(HistogramObserver, DeferredObservationsReplayExactlyAsOneProcess) {
  at::manual_seed(7);
  // Ranges that grow up and down, shrink, jump past the 64-grid defer limit (those
  // batches are copied), and values on bin edges (integers on a power-of-two grid).
  std::vector<at::Tensor> batches;
  const double scales[] = {1, 1.5, 0.5, 3, 2, 8, 1, 700, 1, 2, 900, 1, 4, 1, 1, 3, 1200, 5};
  for (size_t i = 0; i < sizeof scales / sizeof scales[0]; ++i) {
    at::Tensor b = at::randn({3000}) * scales[i] + (i % 3 == 0 ? 0.5 * scales[i] : 0.0);
    if (i % 4 == 1) b = at::round(b);
    batches.push_back(b);
  }
  batches.push_back(at::zeros({0}));  // an empty tensor: nothing to count
  batches.push_back(at::full({64}, 2.0f));
  for (int world : {1, 2, 3, 4}) expect_deferred_replay_exact(batches, world);
}

TEST(HistogramObserver, RangeGrowingPastTheLatticeRestartsItAndKeepsEveryCount) {
  // An all-zero first batch gives a grid 1e-6 wide; values up to 1e7 then need more
  // than 2^50 cells of that lattice: the lattice restarts on the current grid.
  HistogramObserver h(spec(QDType::kUInt8, QScheme::kAffine), Algorithm::kMinMax);
  h.forward(at::zeros({100}));
  at::manual_seed(11);
  at::Tensor big = at::randn({5000}) * 3e6;
  h.forward(big);
  at::Tensor small = at::randn({300});
  h.forward(small);
  const Histogram g = h.histogram();
  EXPECT_EQ(g.total(), 5400.0);
  EXPECT_LE(g.lo, big.min().item<double>());
  EXPECT_GE(g.lo + g.width * static_cast<double>(g.counts.size()), big.max().item<double>());
  // Deferred observations work on the restarted lattice; one spanning more than 64
  // grids is declined (the caller keeps a copy and feeds it at its turn).
  DeferredObservation d;
  ASSERT_TRUE(h.defer(small, &d)) << "within the grid";
  h.commit(d);
  EXPECT_EQ(h.histogram().total(), 5700.0);
  EXPECT_FALSE(h.defer(at::full({10}, 1e10f), &d));
}

// Counting uses a float shortcut away from bin edges and the lattice's double
// arithmetic near them: every value lands where exact arithmetic puts it. The
// values sit on both sides of every edge (the nearest floats), at the edges of
// the range, outside it, and at random; the expectation is floor((x - lo) / width)
// in long double. Grids near zero (the shortcut) and far from it (doubles only).
TEST(HistogramObserver, ValuesBesideEveryBinEdgeLandInTheirBin) {
  for (const auto& range : {std::pair<float, float>{-3.1f, 7.3f}, {0.0f, 6.0f}, {1e-3f, 2.7e-3f}, {1000.0f, 1001.5f}}) {
    HistogramObserver obs(QuantSpec{}, Algorithm::kMinMax, {}, 2048);
    obs.forward(at::tensor({range.first, range.second}));  // the grid: no later batch widens it
    const Histogram g = obs.histogram();
    std::vector<float> v;
    for (int64_t b = 0; b <= 2048; ++b) {
      const float e = static_cast<float>(g.lo + static_cast<double>(b) * g.width);
      v.push_back(e);
      v.push_back(std::nextafter(e, -INFINITY));
      v.push_back(std::nextafter(e, INFINITY));
    }
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(range.first, range.second);
    for (int i = 0; i < 200000; ++i) v.push_back(u(rng));
    std::vector<float> in;  // only values inside the range: the grid stays
    for (float x : v)
      if (x >= range.first && x <= range.second) in.push_back(x);
    obs.forward(at::tensor(in));
    std::vector<double> want(2048, 0.0);
    want[static_cast<size_t>(std::floor((static_cast<long double>(range.first) - g.lo) / g.width))] += 1;
    want[std::min<size_t>(2047, static_cast<size_t>(std::floor((static_cast<long double>(range.second) - g.lo) / g.width)))] += 1;
    for (float x : in) {
      const long double b = std::floor((static_cast<long double>(x) - static_cast<long double>(g.lo)) / static_cast<long double>(g.width));
      want[static_cast<size_t>(std::min<long double>(std::max<long double>(b, 0), 2047))] += 1;
    }
    const Histogram h = obs.histogram();
    ASSERT_EQ(h.lo, g.lo);
    ASSERT_EQ(h.width, g.width);
    int64_t wrong = 0;
    for (size_t b = 0; b < 2048; ++b) wrong += h.counts[b] != want[b];
    EXPECT_EQ(wrong, 0) << "range [" << range.first << ", " << range.second << "]: bins differ from exact arithmetic";
  }
}

TEST(HistogramObserver, SaveAndLoadKeepsStatistics) {
  at::manual_seed(2);
  auto h = std::make_shared<HistogramObserver>(spec(QDType::kUInt8, QScheme::kAffine), Algorithm::kEntropy);
  h->forward(at::randn({4096}));
  std::stringstream ss;
  torch::save(h, ss);
  auto g = std::make_shared<HistogramObserver>(spec(QDType::kUInt8, QScheme::kAffine), Algorithm::kEntropy);
  torch::load(g, ss);
  EXPECT_EQ(g->histogram().counts, h->histogram().counts);
  EXPECT_TRUE(at::equal(g->calculate_qparams().scale, h->calculate_qparams().scale));
}

TEST(Algorithms, ClippingBeatsMinMaxOnHeavyTails) {
  // Laplace(0, 1): at 4 bits the optimal clip is near 5 (Banner et al., ACIQ),
  // far inside the maximum (~12): every clipping algorithm must beat min/max.
  at::manual_seed(3);
  at::Tensor u = at::rand({200000}) - 0.5;
  at::Tensor x = -at::sign(u) * at::log1p(-2 * u.abs());
  for (QScheme scheme : {QScheme::kAffine, QScheme::kSymmetric}) {
    QuantSpec s = QuantSpec::make(scheme == QScheme::kAffine ? QDType::kUInt8 : QDType::kInt8, scheme, 4);
    HistogramObserver h(s, Algorithm::kMinMax);
    h.forward(x);
    Histogram hg = h.histogram();
    auto mm = clip_range(hg, Algorithm::kMinMax, s);
    EXPECT_EQ(mm.second, x.max().item<float>());
    const double e_minmax = quantization_mse(hg, mm.first, mm.second, s);
    double best_other = INFINITY;
    for (Algorithm a : {Algorithm::kPercentile, Algorithm::kEntropy, Algorithm::kMSE}) {
      auto r = clip_range(hg, a, s);
      EXPECT_LT(r.second, 0.8f * mm.second) << algorithm_name(a) << " " << qscheme_name(scheme);
      EXPECT_GT(r.second, 2.0f) << algorithm_name(a) << " " << qscheme_name(scheme);
      const double e = quantization_mse(hg, r.first, r.second, s);
      EXPECT_LT(e, e_minmax) << algorithm_name(a) << " " << qscheme_name(scheme);
      best_other = std::min(best_other, e);
    }
    Algorithm chosen;
    auto ra = clip_range(hg, Algorithm::kAuto, s, {}, &chosen);
    EXPECT_NE(chosen, Algorithm::kAuto);
    EXPECT_LE(quantization_mse(hg, ra.first, ra.second, s), best_other + 1e-12);
  }
}

TEST(Algorithms, UniformDataKeepsNearlyTheFullRange) {
  at::manual_seed(4);
  at::Tensor x = at::rand({100000}) * 6 - 1;  // U(-1, 5)
  QuantSpec s = QuantSpec::make(QDType::kUInt8, QScheme::kAffine);
  HistogramObserver h(s, Algorithm::kMinMax);
  h.forward(x);
  for (Algorithm a : {Algorithm::kPercentile, Algorithm::kEntropy, Algorithm::kMSE, Algorithm::kAuto}) {
    auto r = clip_range(h.histogram(), a, s);
    EXPECT_GT(r.second, 4.8f) << algorithm_name(a);
    EXPECT_LT(r.first, -0.8f) << algorithm_name(a);
  }
}

// --- FakeQuantize ----------------------------------------------------------------

TEST(FakeQuantize, PerTensorForwardAndGradientMatchTorchAo) {
  FakeQuantize fq(std::make_shared<MovingAverageMinMaxObserver>(spec(QDType::kUInt8, QScheme::kAffine), 0.01));
  fq.forward(T("b0"));
  at::Tensor x = T("b1").clone().requires_grad_(true);
  at::Tensor y = fq.forward(x);
  (y * T("b2")).sum().backward();
  auto q = fq.qparams();
  EXPECT_TRUE(at::equal(q.scale.reshape({-1}), T("fq_scale").reshape({-1})));
  EXPECT_TRUE(at::equal(q.zero_point.reshape({-1}), T("fq_zp").reshape({-1})));
  EXPECT_TRUE(at::equal(y, T("fq_out")));
  EXPECT_TRUE(at::equal(x.grad(), T("fq_grad")));
}

// A target's rounding (BackendConfig::arithmetic): ties go up (half_up) or away from
// zero instead of to even; elsewhere the value and, everywhere, the gradient stay torch.ao's.
TEST(FakeQuantize, TargetRoundingChangesTiesOnly) {
  QuantSpec s = spec(QDType::kInt8, QScheme::kSymmetric);
  auto fixed = std::make_shared<FixedQParamsObserver>(s, -1.0f, 1.0f);  // scale 1/128, zero point 0
  FakeQuantize fq(fixed);
  fq.disable_observer();
  const float u = 1.0f / 128;
  // Ties at -2.5, -1.5, 0.5, 1.5 units; then non-ties, and values beyond the range.
  at::Tensor x = at::tensor({-2.5f * u, -1.5f * u, 0.5f * u, 1.5f * u, 0.3f * u, -0.7f * u, 2.0f, -2.0f});
  auto run = [&](qfx::runtime::Rounding r) {
    fq.set_rounding(r);
    at::Tensor xi = x.clone().requires_grad_(true);
    at::Tensor y = fq.forward(xi);
    (y * at::arange(1, 9, at::kFloat)).sum().backward();
    return std::make_pair((y / u).round().to(at::kInt), xi.grad());
  };
  auto [even, g_even] = run(qfx::runtime::Rounding::kHalfEven);
  auto [up, g_up] = run(qfx::runtime::Rounding::kHalfUp);
  auto [away, g_away] = run(qfx::runtime::Rounding::kHalfAwayFromZero);
  EXPECT_TRUE(at::equal(even, at::tensor({-2, -2, 0, 2, 0, -1, 127, -128}, at::kInt))) << even;
  EXPECT_TRUE(at::equal(up, at::tensor({-2, -1, 1, 2, 0, -1, 127, -128}, at::kInt))) << up;
  EXPECT_TRUE(at::equal(away, at::tensor({-3, -2, 1, 2, 0, -1, 127, -128}, at::kInt))) << away;
  EXPECT_TRUE(at::equal(g_up, g_even));  // the STE: 1 inside the range, 0 outside
  EXPECT_TRUE(at::equal(g_away, g_even));
  EXPECT_TRUE(at::equal(g_even, at::tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 0.f, 0.f})));
}

TEST(FakeQuantize, PerChannelForwardAndGradientMatchTorchAo) {
  QuantSpec s = spec(QDType::kInt8, QScheme::kSymmetric);
  s.per_channel = true;
  FakeQuantize fq(std::make_shared<MovingAveragePerChannelMinMaxObserver>(s, 0.01));
  at::Tensor x = (T("w") * 3).clone().requires_grad_(true);
  at::Tensor y = fq.forward(x);
  (y * y).sum().backward();
  EXPECT_TRUE(at::equal(y, T("fqw_out")));
  EXPECT_TRUE(at::equal(x.grad(), T("fqw_grad")));
}

TEST(FakeQuantize, LearnableScaleMatchesTorchAoLSQ) {
  FakeQuantize fq(std::make_shared<MovingAverageMinMaxObserver>(spec(QDType::kUInt8, QScheme::kAffine), 0.01),
                  /*learnable=*/true);
  fq.forward(T("b0"));  // initialises the scale from the observer
  fq.disable_observer();
  at::Tensor x = T("b1").clone().requires_grad_(true);
  at::Tensor y = fq.forward(x);
  (y * T("b2")).sum().backward();
  EXPECT_LT((y - T("lsq_out")).abs().max().item<float>(), 1e-6f);
  EXPECT_LT((x.grad() - T("lsq_grad")).abs().max().item<float>(), 1e-6f);
  at::Tensor sg = fq.named_parameters()["scale"].grad().reshape({-1});
  EXPECT_NEAR(sg.item<float>(), T("lsq_scale_grad").item<float>(), 1e-4 * std::abs(T("lsq_scale_grad").item<float>()) + 1e-6);
}

TEST(FakeQuantize, ThreeStatesForTheWholeModel) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  auto a = root->register_module("a", std::make_shared<FakeQuantize>(std::make_shared<MinMaxObserver>(spec(QDType::kUInt8, QScheme::kAffine))));
  auto b = root->register_module("b", std::make_shared<FakeQuantize>(std::make_shared<MinMaxObserver>(spec(QDType::kInt8, QScheme::kSymmetric))));
  at::Tensor x = at::randn({64}) * 4;
  EXPECT_EQ(set_quant_state(*root, QuantState::kCalibration), 2);
  EXPECT_TRUE(at::equal(a->forward(x), x)) << "calibration passes values through";
  EXPECT_TRUE(a->observer().has_data());
  set_quant_state(*root, QuantState::kFakeQuant);
  at::Tensor y = a->forward(x);
  EXPECT_FALSE(at::equal(y, x));
  auto q = a->qparams();
  at::Tensor ref = at::fake_quantize_per_tensor_affine(x, q.scale.item<double>(), q.zero_point.item<int64_t>(), 0, 255);
  EXPECT_TRUE(at::equal(y, ref));
  set_quant_state(*root, QuantState::kFloat);
  EXPECT_TRUE(at::equal(b->forward(x * 100), x * 100));
  EXPECT_FALSE(b->observer().has_data()) << "float state does not observe";
}
