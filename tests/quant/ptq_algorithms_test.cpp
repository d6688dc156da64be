// Cross-layer equalisation, AdaRound and bias correction on small CNNs with
// 4-bit per-tensor weights: each keeps the float function where it should and
// lowers the error it targets, measured against libtorch's float model.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>
#include <set>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>

#include "qfx/fx/tracer.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/ptq_algorithms.h"
#include "../common/next_batch.h"
#include "qfx/quant/quantized_modules.h"
#include "qfx/error.h"

using namespace qfx;
using namespace qfx::quant;
using qfx::test::batches_of;

namespace {

// conv -> bn -> relu -> depthwise conv -> relu -> conv -> relu -> pool -> linear, with
// the first conv's output channels scaled by factors spanning 10^3 and the
// depthwise conv's inputs scaled back: the float function is an ordinary CNN,
// but per-tensor weight ranges are dominated by a few channels (the case
// equalisation exists for).
struct NetImpl : torch::nn::Module {
  NetImpl() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)));
    b1 = register_module("b1", torch::nn::BatchNorm2d(8));
    c2 = register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 8, 3).padding(1).groups(8)));
    c3 = register_module("c3", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).padding(1)));
    fc = register_module("fc", torch::nn::Linear(16, 10));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::relu(b1->forward(c1->forward(x)));
    y = torch::relu(c2->forward(y));
    y = torch::relu(c3->forward(y));
    return fc->forward(torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1));
  }
  torch::nn::Conv2d c1{nullptr}, c2{nullptr}, c3{nullptr};
  torch::nn::BatchNorm2d b1{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

Net make_net(bool imbalanced) {
  torch::manual_seed(3);
  Net net;
  at::NoGradGuard ng;
  // Batch-norm statistics of random inputs (a random network's are meaningless).
  net->train();
  for (int i = 0; i < 4; ++i) net->forward(at::randn({32, 3, 12, 12}));
  net->eval();
  if (imbalanced) {
    const at::Tensor a = at::pow(10.0, at::linspace(-1.5, 1.5, 8));
    net->b1->weight.mul_(a);
    net->b1->bias.mul_(a);
    net->c2->weight.div_(a.reshape({8, 1, 1, 1}));
  }
  return net;
}

QConfigMapping w4_per_tensor() {
  auto q = std::make_shared<QConfig>();
  q->weight.bits = 4;
  q->weight.per_channel = false;
  q->activation.bits = 8;
  QConfigMapping m;
  m.set_global(q);
  return m;
}

std::shared_ptr<fx::GraphModule> prepared(Net net) {
  auto gm = fx::trace_module(net.ptr(), [net](std::vector<c10::IValue> in) mutable { return net->forward(in[0].toTensor()); },
                             {at::randn({2, 3, 12, 12})});
  gm->eval();
  prepare_fx(*gm, w4_per_tensor(), BackendConfig::resolve("onednn"));
  return gm;
}

at::Tensor calibration_data() {
  torch::manual_seed(11);
  return at::randn({128, 3, 12, 12});
}

void calibrate_in_libtorch(fx::GraphModule& gm, const at::Tensor& data) {
  at::NoGradGuard ng;
  set_quant_state(gm, QuantState::kCalibration);
  for (int64_t i = 0; i < data.size(0); i += 32) gm.forward(data.slice(0, i, i + 32));
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
}

double sqnr(const at::Tensor& ref, const at::Tensor& x) {
  return 10 * std::log10(ref.pow(2).sum().item<double>() / (ref - x).pow(2).sum().item<double>());
}

// Output SQNR of the fake-quantized model against the float network on held-out data.
double output_sqnr(fx::GraphModule& gm, Net& net) {
  at::NoGradGuard ng;
  torch::manual_seed(99);
  const at::Tensor x = at::randn({64, 3, 12, 12});
  return sqnr(net->forward(x), gm.forward(x));
}

}  // namespace

TEST(CrossLayerEqualization, KeepsTheFloatFunctionAndEqualisesRanges) {
  Net net = make_net(true);
  auto gm = prepared(net);
  at::NoGradGuard ng;
  const at::Tensor x = at::randn({8, 3, 12, 12});
  const at::Tensor before = net->forward(x);
  set_quant_state(*gm, QuantState::kFloat);
  auto pairs = cross_layer_equalization(*gm);
  // c1 -> c2 (depthwise, through a fused ReLU and the activation observer) and c2 -> c3;
  // c3 -> fc is not a pair (pooling in between).
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].first, "c1");
  EXPECT_EQ(pairs[0].second, "c2");
  EXPECT_EQ(pairs[1].second, "c3");
  EXPECT_GT(pairs[0].spread_first_before, 100.0);
  EXPECT_LT(pairs[0].spread_first_after, pairs[0].spread_first_before / 10);
  // Equalised: each channel's range is the same in both layers (last sweep converged).
  auto* c1 = dynamic_cast<FusedConvLinear*>(gm->get_submodule("c1").get());
  auto* c2 = dynamic_cast<FusedConvLinear*>(gm->get_submodule("c2").get());
  const at::Tensor r1 = c1->weight().reshape({8, -1}).abs().amax(1);
  const at::Tensor r2 = c2->weight().reshape({8, -1}).abs().amax(1);
  EXPECT_TRUE(at::allclose(r1, r2, 0.05, 0)) << r1 << r2;
  // The float function is unchanged.
  const at::Tensor after = gm->forward(x);
  EXPECT_LT((after - before).abs().max().item<double>(), 1e-4 * before.abs().max().item<double>());
  // An observer that already saw data refuses.
  calibrate_in_libtorch(*gm, calibration_data());
  EXPECT_THROW(cross_layer_equalization(*gm), qfx::ArgumentError);
}

TEST(CrossLayerEqualization, Raises4BitPerTensorAccuracy) {
  Net net = make_net(true);
  auto plain = prepared(net);
  calibrate_in_libtorch(*plain, calibration_data());
  auto eq = prepared(net);
  cross_layer_equalization(*eq);
  calibrate_in_libtorch(*eq, calibration_data());
  const double s_plain = output_sqnr(*plain, net), s_eq = output_sqnr(*eq, net);
  std::cout << "output SQNR, 4-bit per-tensor weights: plain " << s_plain << " dB, equalised " << s_eq << " dB\n";
  EXPECT_GT(s_eq, s_plain + 3.0);
}

TEST(AdaRound, LowersLayerErrorAndExportsItsCodes) {
  Net net = make_net(false);
  auto gm = prepared(net);
  const at::Tensor data = calibration_data();
  calibrate_in_libtorch(*gm, data);
  const double s_nearest = output_sqnr(*gm, net);
  AdaRoundOptions o;
  o.iterations = 500;  // reduced for CI, with a larger step to match
  o.lr = 1e-2;
  o.num_samples = 128;
  int64_t calls = 0;
  o.progress = [&](const std::string&, int64_t done, int64_t total) {
    ++calls;
    EXPECT_EQ(total, 4);
    EXPECT_EQ(done, calls);
  };
  auto rep = adaround(*gm, batches_of(data, 32), o);
  ASSERT_EQ(rep.size(), 4u);
  EXPECT_EQ(calls, 4);
  int improved = 0;
  for (const auto& r : rep) {
    std::cout << r.layer << " " << r.sqnr_before_db << " -> " << r.sqnr_after_db << " " << r.kept << "\n";
    EXPECT_GE(r.sqnr_after_db, r.sqnr_before_db) << r.layer;
    improved += r.kept == "adaround" && r.sqnr_after_db > r.sqnr_before_db + 0.5;
  }
  EXPECT_GE(improved, 3) << "AdaRound should beat nearest rounding on most 4-bit layers";
  const double s_ada = output_sqnr(*gm, net);
  std::cout << "output SQNR, 4-bit per-tensor weights: nearest " << s_nearest << " dB, AdaRound " << s_ada << " dB\n";
  EXPECT_GT(s_ada, s_nearest);
  // The weights are on the grid (fake quantization leaves them as they are) and the
  // qparams are frozen: neither a new calibration state nor convert changes them.
  at::NoGradGuard ng;
  set_quant_state(*gm, QuantState::kCalibration);
  set_quant_state(*gm, QuantState::kFakeQuant);
  auto converted = convert_fx(*gm);
  for (const char* path : {"c1", "c2", "c3", "fc"}) {
    auto* f = dynamic_cast<FusedConvLinear*>(gm->get_submodule(path).get());
    ASSERT_NE(f, nullptr) << path;
    EXPECT_TRUE(f->weight_fake_quant()->qparams_frozen()) << path;
    EXPECT_FALSE(f->weight_fake_quant()->observer_enabled()) << path;
    EXPECT_TRUE(at::equal(f->weight_fake_quant()->forward(f->weight()), f->weight())) << path;
    auto* q = dynamic_cast<QuantizedConvLinear*>(converted->get_submodule(path).get());
    ASSERT_NE(q, nullptr) << path;
    EXPECT_TRUE(at::allclose(q->weight(), f->weight(), 0, 1e-6)) << path;
    EXPECT_LE(q->weight_codes().max().item<int>(), 7) << path;
    EXPECT_GE(q->weight_codes().min().item<int>(), -8) << path;
  }
}

TEST(BiasCorrection, RemovesTheMeanOutputShift) {
  Net net = make_net(false);
  auto gm = prepared(net);
  const at::Tensor data = calibration_data();
  calibrate_in_libtorch(*gm, data);
  // The mean per-class logit error of the quantized model on held-out data.
  auto mean_shift = [&]() {
    at::NoGradGuard ng;
    torch::manual_seed(5);
    const at::Tensor x = at::randn({256, 3, 12, 12});
    return (gm->forward(x) - net->forward(x)).mean(0).abs().mean().item<double>();
  };
  const double before = mean_shift();
  auto rep = bias_correction(*gm, batches_of(data, 32), 128);
  ASSERT_EQ(rep.size(), 4u);
  for (const auto& r : rep) {
    std::cout << r.layer << " " << r.sqnr_before_db << " -> " << r.sqnr_after_db << "\n";
    EXPECT_GE(r.sqnr_after_db, r.sqnr_before_db) << r.layer;
  }
  const double after = mean_shift();
  std::cout << "mean |logit shift|: before " << before << ", after " << after << "\n";
  EXPECT_LT(after, 0.5 * before);
}

namespace {

// A transformer-style MLP block: LayerNorm -> Linear -> ReLU -> Linear on [N, T, 64]
// tokens, with four LayerNorm output channels scaled by 50 (the outlier channels of
// large language models) and the first Linear's weights reading them scaled back:
// the float function is an ordinary block; per-tensor int8 activations are not.
struct BlockImpl : torch::nn::Module {
  BlockImpl() {
    ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({64})));
    fc1 = register_module("fc1", torch::nn::Linear(64, 128));
    fc2 = register_module("fc2", torch::nn::Linear(128, 16));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(torch::relu(fc1->forward(ln->forward(x)))); }
  torch::nn::LayerNorm ln{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Block);

Block make_block() {
  torch::manual_seed(7);
  Block b;
  at::NoGradGuard ng;
  b->ln->weight.uniform_(0.5, 1.5);
  b->ln->bias.uniform_(-0.2, 0.2);
  b->ln->weight.slice(0, 0, 4).mul_(50);
  b->ln->bias.slice(0, 0, 4).mul_(50);
  b->fc1->weight.slice(1, 0, 4).div_(50);
  return b;
}

// The block as the C++ tracer records it (aten::layer_norm reading get_attr
// weight and bias), or with the LayerNorm as a call_module leaf (as traced from
// TorchScript), built by hand.
std::shared_ptr<fx::GraphModule> block_graph(Block b, bool norm_module) {
  if (!norm_module)
    return fx::trace_module(b.ptr(), [b](std::vector<c10::IValue> in) mutable { return b->forward(in[0].toTensor()); },
                            {at::randn({2, 8, 64})});
  auto gm = std::make_shared<fx::GraphModule>();
  gm->add_submodule("ln", b->ln.ptr(), fx::tensor_call_fn(b->ln.ptr()));
  gm->add_submodule("fc1", b->fc1.ptr(), fx::tensor_call_fn(b->fc1.ptr()));
  gm->add_submodule("fc2", b->fc2.ptr(), fx::tensor_call_fn(b->fc2.ptr()));
  fx::Graph& g = gm->graph();
  fx::Node* x = g.placeholder("x");
  fx::Node* h = g.call_module("fc1", {g.call_module("ln", {x})});
  g.output(g.call_module("fc2", {g.call_function("aten::relu", {h})}));
  return gm;
}

double block_sqnr(bool smooth, bool norm_module = false) {
  Block b = make_block();
  auto gm = block_graph(b, norm_module);
  gm->eval();
  prepare_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  torch::manual_seed(12);
  const at::Tensor data = at::randn({64, 8, 64});
  if (smooth) {
    auto rep = smooth_quant(*gm, batches_of(data, 16), 0.5);
    EXPECT_EQ(rep.size(), 1u);
    if (rep.size() == 1) {
      EXPECT_EQ(rep[0].linears, std::vector<std::string>{"fc1"});
      EXPECT_GT(rep[0].spread_before, 20.0);
      EXPECT_LT(rep[0].spread_after, rep[0].spread_before / 4);
    }
    // The float function is unchanged, and the user's block keeps its parameters.
    at::NoGradGuard ng;
    set_quant_state(*gm, QuantState::kFloat);
    const at::Tensor x = at::randn({4, 8, 64});
    const at::Tensor y = make_block()->forward(x);
    EXPECT_LT((gm->forward(x) - y).abs().max().item<double>(), 1e-4 * y.abs().max().item<double>());
    EXPECT_TRUE(at::equal(b->ln->weight, make_block()->ln->weight));
    EXPECT_TRUE(at::equal(b->fc1->weight, make_block()->fc1->weight));
  }
  calibrate_in_libtorch(*gm, data);
  at::NoGradGuard ng;
  torch::manual_seed(13);
  const at::Tensor x = at::randn({32, 8, 64});
  return sqnr(make_block()->forward(x), gm->forward(x));
}

}  // namespace

TEST(SmoothQuant, OutlierChannelsMoveIntoTheWeights) {
  for (bool norm_module : {false, true}) {
    const double plain = block_sqnr(false, norm_module), smoothed = block_sqnr(true, norm_module);
    std::cout << "int8 output SQNR with 50x outlier channels (LayerNorm as " << (norm_module ? "module" : "aten op")
              << "): plain " << plain << " dB, SmoothQuant " << smoothed << " dB\n";
    EXPECT_GT(smoothed, plain + 6.0) << norm_module;
  }
}

// Quantizing one layer costs less than quantizing all of them; the ranking (by
// that cost) puts first the layer whose float fallback recovers the most.
TEST(LayerSensitivity, OneLayerAndAllButOne) {
  Net net = make_net(false);
  auto gm = prepared(net);
  const at::Tensor data = calibration_data();
  calibrate_in_libtorch(*gm, data);
  double all = 0;
  auto s = layer_sensitivity(*gm, batches_of(data, 32), 128, &all);
  ASSERT_EQ(s.size(), 4u);
  for (size_t i = 0; i < s.size(); ++i) {
    std::cout << s[i].layer << ": only " << s[i].only_this_db << " dB, all but " << s[i].all_but_this_db
              << " dB (all " << all << " dB)\n";
    EXPECT_GT(s[i].only_this_db, all) << s[i].layer;
    if (i > 0) EXPECT_LE(s[i - 1].only_this_db, s[i].only_this_db);
  }
  // Leaving the most sensitive layer float helps the most. (Leaving a harmless one
  // float can even lower the SQNR a little: errors of layers partly cancel.)
  for (size_t i = 1; i < s.size(); ++i) EXPECT_GT(s[0].all_but_this_db, s[i].all_but_this_db) << s[i].layer;
  EXPECT_GT(s[0].all_but_this_db, all + 1.0);
  // The model is left fake-quantized: the same output as before.
  at::NoGradGuard ng;
  const at::Tensor x = at::randn({4, 3, 12, 12});
  const at::Tensor y1 = gm->forward(x);
  set_quant_state(*gm, QuantState::kFakeQuant);
  disable_observer(*gm);
  EXPECT_TRUE(at::equal(y1, gm->forward(x)));
}

// A calibrated fake-quantized net and 64 held-out samples drawn with `seed`.
struct FallbackCase {
  explicit FallbackCase(uint64_t seed) : net(make_net(true)), gm(prepared(net)), data(calibration_data()) {
    calibrate_in_libtorch(*gm, data);
    torch::manual_seed(seed);
    for (int i = 0; i < 2; ++i) held.batches.push_back({at::randn({32, 3, 12, 12})});
  }
  Net net;
  std::shared_ptr<fx::GraphModule> gm;
  at::Tensor data;
  HeldOutData held;
};

// Output SQNR (dB) of the (fake-quantized) `gm` against the float `net` on `held`'s batches.
double held_out_sqnr(Net& net, fx::GraphModule& gm, const HeldOutData& held) {
  at::NoGradGuard ng;
  std::vector<at::Tensor> r, q;
  for (const auto& b : held.batches) {
    r.push_back(net->forward(b[0]));
    q.push_back(gm.forward(b[0]));
  }
  return sqnr(at::cat(r), at::cat(q));
}

TEST(AutoFallback, MovesLayersUntilTheTargetAndMeasuresItRight) {
  FallbackCase fc(5);
  Net& net = fc.net;
  auto& gm = fc.gm;
  const at::Tensor& data = fc.data;
  HeldOutData& held = fc.held;
  // Independent: libtorch's float network against the fake-quantized graph.
  auto held_sqnr = [&] { return held_out_sqnr(net, *gm, held); };
  const double all = held_sqnr();
  AutoFallbackOptions o;
  o.metric = "sqnr";
  o.min_sqnr_db = all + 6.0;
  o.max_layers = 4;
  o.ranking_samples = 64;
  const AutoFallbackResult r = auto_fallback(*gm, batches_of(data, 32), held, o);
  std::cout << "all quantized " << r.quantized << " dB, target " << r.target << " dB\n";
  for (const auto& s : r.steps) std::cout << "  " << s.layer << " -> " << s.moved_to << ": " << s.metric << " dB\n";
  EXPECT_NEAR(r.quantized, all, 0.05);
  EXPECT_EQ(r.held_out_samples, 64);
  ASSERT_FALSE(r.steps.empty());
  ASSERT_TRUE(r.reached);
  std::set<std::string> moved;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    EXPECT_TRUE(moved.insert(r.steps[i].layer).second) << r.steps[i].layer << " moved twice";
    EXPECT_EQ(r.steps[i].moved_to, "float");
    EXPECT_EQ(r.steps[i].metric >= r.target, i + 1 == r.steps.size()) << "stops at the first step that reaches the target";
  }
  // The moved layers' weights stay float on return, the others quantized; the
  // metric of the last step is the model's as returned.
  for (const auto& l : {"c1", "c2", "c3", "fc"}) {
    auto* f = dynamic_cast<FusedConvLinear*>(gm->get_submodule(l).get());
    ASSERT_NE(f, nullptr) << l;
    EXPECT_EQ(f->weight_fake_quant()->fake_quant_enabled(), moved.count(l) == 0) << l;
  }
  EXPECT_NEAR(held_sqnr(), r.steps.back().metric, 0.05);
  EXPECT_GE(r.steps.back().metric, all + 6.0);
  ASSERT_EQ(r.notes.size(), 1u);  // int16 is noted as unavailable, not silently dropped
  EXPECT_NE(r.notes[0].find("int16"), std::string::npos);

  // top1 against labels: a target already met moves nothing; bad options throw.
  AutoFallbackOptions t;
  t.tolerance = 100;
  held.labels = at::zeros({64}, at::kLong);
  EXPECT_TRUE(auto_fallback(*gm, batches_of(data, 32), held, t).steps.empty());
  held.labels = at::zeros({63}, at::kLong);
  EXPECT_THROW(auto_fallback(*gm, batches_of(data, 32), held, t), qfx::ArgumentError);
  t.candidates = {"int16"};  // the target offers no s16 (int16_available false)
  EXPECT_THROW(auto_fallback(*gm, batches_of(data, 32), held, t), qfx::ArgumentError);
  o.metric = "top5";
  EXPECT_THROW(auto_fallback(*gm, batches_of(data, 32), held, o), qfx::ArgumentError);
}

// Where the target offers s16, a move requantizes the layer's output to 16 bits:
// the output SQNR (measured independently against libtorch's float network) rises,
// weights stay quantized, and the moved outputs' FakeQuantizes span int16.
TEST(AutoFallback, Int16MovesRequantizeOutputsTo16Bits) {
  FallbackCase fc(6);
  Net& net = fc.net;
  auto& gm = fc.gm;
  const at::Tensor& data = fc.data;
  HeldOutData& held = fc.held;
  auto held_sqnr = [&] { return held_out_sqnr(net, *gm, held); };
  const double all = held_sqnr();
  AutoFallbackOptions o;
  o.metric = "sqnr";
  o.min_sqnr_db = 200;  // unreachable: every allowed move is made
  o.max_layers = 2;
  o.ranking_samples = 64;
  o.int16_available = true;
  const AutoFallbackResult r = auto_fallback(*gm, batches_of(data, 32), held, o);
  for (const auto& s : r.steps) std::cout << "  " << s.layer << " -> " << s.moved_to << ": " << s.metric << " dB\n";
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_TRUE(r.notes.empty());
  for (const auto& s : r.steps) EXPECT_EQ(s.moved_to, "int16");
  // The first move helps; later ones add less (the weights' error dominates here).
  EXPECT_GT(r.steps[0].metric, all + 0.1);
  EXPECT_GT(r.steps.back().metric, all + 0.1);
  EXPECT_NEAR(held_sqnr(), r.steps.back().metric, 0.05);
  int wide = 0;
  for (const auto& m : gm->modules()) {
    if (auto* fq = dynamic_cast<FakeQuantize*>(m.get())) {
      if (fq->observer().spec().dtype != QDType::kInt16) continue;
      ++wide;
      EXPECT_EQ(fq->observer().spec().quant_min, -32768);
      EXPECT_EQ(fq->observer().spec().quant_max, 32767);
      EXPECT_EQ(fq->qparams().quant_max, 32767);
    }
  }
  EXPECT_GE(wide, 2);
  for (const auto& l : {"c1", "c2", "c3", "fc"})
    EXPECT_TRUE(dynamic_cast<FusedConvLinear*>(gm->get_submodule(l).get())->weight_fake_quant()->fake_quant_enabled()) << l;
}

// A net prepared with 8-bit `kind` activation observers (algorithm `a`) and
// per-channel 8-bit weights, calibrated on the usual data.
std::shared_ptr<fx::GraphModule> histogram_prepared(Net net, Algorithm a, ObserverKind kind = ObserverKind::kHistogram) {
  auto gm = fx::trace_module(net.ptr(), [net](std::vector<c10::IValue> in) mutable { return net->forward(in[0].toTensor()); },
                             {at::randn({2, 3, 12, 12})});
  gm->eval();
  auto q = std::make_shared<QConfig>();
  q->activation.observer = kind;
  q->activation.algorithm = a;
  QConfigMapping m;
  m.set_global(q);
  prepare_fx(*gm, m, BackendConfig::resolve("onednn"));
  calibrate_in_libtorch(*gm, calibration_data());
  return gm;
}

// Every candidate's SQNR is the fake-quantized model's output SQNR against the
// float net (libtorch) on the same samples with that algorithm; the best stays in
// place, on every histogram observer; weights are untouched.
TEST(RangeSearch, ChoosesTheCandidateWithTheBestOutputSqnr) {
  Net net = make_net(true);
  auto gm = histogram_prepared(net, Algorithm::kMSE);
  EXPECT_GT(count_histogram_activations(*gm), 3);
  std::vector<at::Tensor> weights;
  for (const auto& l : gm->named_modules("", false))
    if (auto* f = dynamic_cast<FusedConvLinear*>(l.value().get())) weights.push_back(f->weight_fake_quant()->qparams().scale.clone());
  const at::Tensor data = calibration_data();
  RangeSearchOptions o;
  o.candidates = {Algorithm::kMinMax, Algorithm::kPercentile, Algorithm::kMSE};
  o.num_samples = 96;
  const RangeSearchResult r = range_search(*gm, batches_of(data, 32), o);
  EXPECT_EQ(r.configured, "mse");
  EXPECT_EQ(r.samples, 96);
  EXPECT_EQ(r.tensors, count_histogram_activations(*gm));
  ASSERT_EQ(r.candidates.size(), 3u);
  at::NoGradGuard ng;
  const at::Tensor x = data.slice(0, 0, 96);
  const at::Tensor ref = net->forward(x);
  double best = -1e9;
  std::string best_name;
  for (const auto& c : r.candidates) {
    EXPECT_EQ(set_activation_range_algorithm(*gm, parse_algorithm(c.algorithm)), r.tensors);
    const double own = sqnr(ref, gm->forward(x));
    std::cout << c.algorithm << ": " << c.sqnr_db << " dB (recomputed " << own << " dB)\n";
    EXPECT_NEAR(c.sqnr_db, own, 1e-3) << c.algorithm;
    if (own > best) best = own, best_name = c.algorithm;
  }
  EXPECT_EQ(r.chosen, best_name);
  // The candidates differ on this net (the check above would pass for any one of them otherwise).
  EXPECT_GT(std::abs(r.candidates[0].sqnr_db - r.candidates[1].sqnr_db), 0.01);
  // Run again: it leaves the chosen algorithm in place, and only on activations.
  range_search(*gm, batches_of(data, 32), o);
  EXPECT_NEAR(sqnr(ref, gm->forward(x)), best, 1e-3);
  size_t i = 0;
  for (const auto& l : gm->named_modules("", false)) {
    if (auto* f = dynamic_cast<FusedConvLinear*>(l.value().get())) EXPECT_TRUE(at::equal(weights[i++], f->weight_fake_quant()->qparams().scale));
    if (auto* fq = dynamic_cast<FakeQuantize*>(l.value().get()))
      if (auto* h = dynamic_cast<HistogramObserver*>(&fq->observer())) EXPECT_EQ(algorithm_name(h->configured_algorithm()), r.chosen);
  }
}

// per_tensor: single activations move where the output SQNR rises; the result's SQNR
// is the model's as left, never below the model-wide choice.
TEST(RangeSearch, PerTensorNeverLowersTheOutputSqnr) {
  Net net = make_net(true);
  auto gm = histogram_prepared(net, Algorithm::kMSE);
  const at::Tensor data = calibration_data();
  RangeSearchOptions o;
  o.candidates = {Algorithm::kMinMax, Algorithm::kPercentile, Algorithm::kEntropy, Algorithm::kMSE};
  o.num_samples = 64;
  o.per_tensor = true;
  const RangeSearchResult r = range_search(*gm, batches_of(data, 32), o);
  double model_wide = -1e9;
  for (const auto& c : r.candidates) model_wide = std::max(model_wide, c.sqnr_db);
  EXPECT_GE(r.sqnr_db, model_wide);
  at::NoGradGuard ng;
  const at::Tensor x = data.slice(0, 0, 64);
  EXPECT_NEAR(sqnr(net->forward(x), gm->forward(x)), r.sqnr_db, 1e-3);
  std::map<std::string, int> used;
  for (const auto& l : gm->named_modules("", false))
    if (auto* fq = dynamic_cast<FakeQuantize*>(l.value().get()))
      if (auto* h = dynamic_cast<HistogramObserver*>(&fq->observer())) ++used[algorithm_name(h->configured_algorithm())];
  int moved = 0;
  for (const auto& [name, n] : used) moved += name == r.chosen ? 0 : n;
  EXPECT_EQ(moved, r.per_tensor_changes);
  std::cout << "model-wide " << r.chosen << " " << model_wide << " dB; per tensor " << r.sqnr_db << " dB, "
            << r.per_tensor_changes << " moved\n";
}

TEST(RangeSearch, NeedsHistogramObserversAndData) {
  Net net = make_net(false);
  auto gm = histogram_prepared(net, Algorithm::kMinMax, ObserverKind::kMinMax);
  EXPECT_EQ(count_histogram_activations(*gm), 0);
  EXPECT_THROW(range_search(*gm, batches_of(calibration_data(), 32)), ArgumentError);
  auto h = histogram_prepared(net, Algorithm::kMinMax);
  EXPECT_THROW(range_search(*h, batches_of(calibration_data().slice(0, 0, 0), 32)), ArgumentError);
  RangeSearchOptions none;
  none.candidates.clear();
  EXPECT_THROW(range_search(*h, batches_of(calibration_data(), 32), none), ArgumentError);
}
