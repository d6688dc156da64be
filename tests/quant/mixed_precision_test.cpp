// Mixed precision under a budget (quant::mixed_precision) on a four-layer MLP with
// weight-only candidates: each layer's sensitivity and byte count are recomputed
// independently (libtorch's float network with one weight replaced by its
// fake-quantized copy, quantized here from torch.ao's symmetric minmax formula);
// the choice is checked against every one of the 81 assignments measured the
// same way; the model is left as it was; the mapping it returns prepares the
// model that was measured.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <torch/nn/modules/linear.h>

#include "qfx/error.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/mixed_precision.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/passes.h"
#include "../common/next_batch.h"
#include "../common/weight_only.h"

using namespace qfx;
using namespace qfx::quant;
using qfx::test::batches_of;

namespace {

constexpr int64_t kBlock = 32;
const char* const kLayers[] = {"l0", "l1", "l2", "l3"};

// x [N, 4, 64] -> 64 -> 96 -> 96 -> 64 -> 10, gelu between; l1 has a few large weights
// per row (its 4-bit blocks lose the rest), l3 is small.
struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    l0 = register_module("l0", torch::nn::Linear(64, 96));
    l1 = register_module("l1", torch::nn::Linear(96, 96));
    l2 = register_module("l2", torch::nn::Linear(96, 64));
    l3 = register_module("l3", torch::nn::Linear(64, 10));
    at::NoGradGuard ng;
    l1->weight.index_put_({at::indexing::Slice(), at::indexing::Slice(0, 96, 13)}, 1.5);
  }
  at::Tensor forward(const at::Tensor& x) {
    return l3->forward(torch::gelu(l2->forward(torch::gelu(l1->forward(torch::gelu(l0->forward(x)))))));
  }
  torch::nn::Linear l0{nullptr}, l1{nullptr}, l2{nullptr}, l3{nullptr};
};
TORCH_MODULE(Mlp);

torch::nn::Linear& linear(Mlp& net, int i) {
  torch::nn::Linear* l[] = {&net->l0, &net->l1, &net->l2, &net->l3};
  return *l[i];
}

// 8-bit per-channel symmetric weights, float activations (weight-only).
QConfigMapping weight_only() { return qfx::test::weight_only(8, 0); }

std::shared_ptr<fx::GraphModule> prepared(Mlp net, const QConfigMapping& m, const at::Tensor& data) {
  auto gm = fx::trace_module(net.ptr(), [net](std::vector<c10::IValue> in) mutable { return net->forward(in[0].toTensor()); },
                             {at::randn({2, 4, 64})});
  gm->eval();
  prepare_fx(*gm, m, BackendConfig::resolve("onednn"));
  qfx::test::calibrate_on(*gm, data.slice(0, 0, 8));
  return gm;
}

// torch.ao's symmetric minmax qparams and rounding, written out: per row (block 0) or per
// block of `block` input channels, scale = max|w| / ((qmax - qmin) / 2), codes clamped.
at::Tensor fake_quant(const at::Tensor& w, int bits, int64_t block) {
  const int64_t out = w.size(0), in = w.size(1), b = block > 0 ? block : in;
  const double qmin = -std::pow(2.0, bits - 1), qmax = std::pow(2.0, bits - 1) - 1;
  at::Tensor y = at::empty_like(w);
  for (int64_t s = 0; s < in; s += b) {
    const at::Tensor part = w.slice(1, s, std::min(s + b, in));
    const at::Tensor scale = (part.abs().amax(1, true) / ((qmax - qmin) / 2)).clamp_min(1.1920928955078125e-07);
    // x * (1 / scale), as torch's fake_quantize kernels compute it (x / scale differs at ties).
    y.slice(1, s, std::min(s + b, in)).copy_(at::clamp(at::round(part * scale.reciprocal()), qmin, qmax) * scale);
  }
  (void)out;
  return y;
}

// Bytes as the search counts them: codes, a float32 scale per group (symmetric: no zero point).
int64_t bytes_of(const at::Tensor& w, const std::string& c) {
  const int64_t out = w.size(0), in = w.size(1);
  if (c == "float") return w.numel() * 4;
  if (c == "w8") return w.numel() + out * 4;
  return w.numel() / 2 + out * ((in + kBlock - 1) / kBlock) * 4;  // w4
}

double sqnr(const at::Tensor& ref, const at::Tensor& x) {
  return 10.0 * std::log10(ref.pow(2).sum().item<double>() / (ref - x).pow(2).sum().item<double>());
}

// libtorch's float network with layer i's weight at candidate pick[i] ("w4", "w8", "float").
struct Independent {
  Mlp net;
  at::Tensor x, ref;
  std::vector<std::map<std::string, at::Tensor>> weights;
  Independent(Mlp n, const at::Tensor& samples) : net(std::move(n)), x(samples) {
    at::NoGradGuard ng;
    ref = net->forward(x);
    for (int i = 0; i < 4; ++i) {
      const at::Tensor w = linear(net, i)->weight.detach().clone();
      weights.push_back({{"float", w}, {"w8", fake_quant(w, 8, 0)}, {"w4", fake_quant(w, 4, kBlock)}});
    }
  }
  double sqnr_of(const std::vector<std::string>& pick) {
    at::NoGradGuard ng;
    for (int i = 0; i < 4; ++i) linear(net, i)->weight.copy_(weights[i].at(pick[i]));
    const double db = sqnr(ref, net->forward(x));
    for (int i = 0; i < 4; ++i) linear(net, i)->weight.copy_(weights[i].at("float"));
    return db;
  }
  int64_t bytes(const std::vector<std::string>& pick) const {
    int64_t b = 0;
    for (int i = 0; i < 4; ++i) b += bytes_of(weights[i].at("float"), pick[i]);
    return b;
  }
};

struct Case {
  Mlp net;
  at::Tensor data;
  std::shared_ptr<fx::GraphModule> gm;
  Case() {
    torch::manual_seed(11);
    net = Mlp();
    net->eval();
    data = at::randn({48, 4, 64});
    gm = prepared(net, weight_only(), data);
  }
  MixedPrecisionOptions options(double effective_bits) const {
    MixedPrecisionOptions o;
    o.candidates = {"w4", "w8", "float"};
    o.block_size = kBlock;
    o.effective_bits = effective_bits;
    o.num_samples = 48;
    return o;
  }
};

std::vector<std::string> chosen(const MixedPrecisionResult& r) {
  std::vector<std::string> c;
  for (const auto& l : r.layers) c.push_back(l.chosen);
  return c;
}

TEST(MixedPrecision, SensitivitiesAndBytesMatchAnIndependentComputation) {
  Case c;
  Independent ind(c.net, c.data);
  at::NoGradGuard ng;
  const at::Tensor before = c.gm->forward(c.data);
  const MixedPrecisionResult r = mixed_precision(*c.gm, weight_only(), BackendConfig::resolve("onednn"),
                                                 batches_of(c.data, 16), c.options(6.0));
  EXPECT_TRUE(at::equal(c.gm->forward(c.data), before)) << "the model is left as it was";
  ASSERT_EQ(r.layers.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const auto& l = r.layers[i];
    EXPECT_EQ(l.layer, kLayers[i]);
    EXPECT_EQ(l.weights, linear(c.net, i)->weight.numel());
    EXPECT_EQ(l.macs, l.weights * 4) << "each weight is used once per token (4 tokens)";
    for (const std::string cand : {"w4", "w8", "float"}) {
      EXPECT_EQ(l.bytes.at(cand), bytes_of(linear(c.net, i)->weight, cand)) << l.layer << " " << cand;
      std::vector<std::string> pick(4, "float");
      pick[i] = cand;
      if (cand == "float") EXPECT_GT(l.sqnr_db.at(cand), 150) << l.layer << ": float to float rounding";
      else EXPECT_NEAR(l.sqnr_db.at(cand), ind.sqnr_of(pick), 0.02) << l.layer << " " << cand;
    }
  }
  EXPECT_NEAR(r.measured_sqnr_db, ind.sqnr_of(chosen(r)), 0.02);
  EXPECT_EQ(r.weight_bytes, ind.bytes(chosen(r)));
  EXPECT_NEAR(r.uniform.at("w4").first, ind.sqnr_of({"w4", "w4", "w4", "w4"}), 0.02);
  EXPECT_EQ(r.uniform.at("w8").second, ind.bytes({"w8", "w8", "w8", "w8"}));
}

// Against all 81 assignments, at budgets from all-w4's size up to all-float's: the choice
// is within the budget and within 1 dB of the best assignment that is.
TEST(MixedPrecision, ChoiceIsNearTheBestAssignmentWithinTheBudget) {
  Case c;
  Independent ind(c.net, c.data);
  int64_t weights = 0;
  for (int i = 0; i < 4; ++i) weights += linear(c.net, i)->weight.numel();
  const std::vector<std::string> names{"w4", "w8", "float"};
  // all-w4: 5 bits per weight (a float scale per 32)
  for (const double bits : {5.05, 5.5, 6.5, 8.6, 12.0, 33.0}) {
    const MixedPrecisionResult r = mixed_precision(*c.gm, weight_only(), BackendConfig::resolve("onednn"),
                                                   batches_of(c.data, 16), c.options(std::min(bits, 32.0)));
    const double budget = std::min(bits, 32.0) * static_cast<double>(weights) / 8.0;
    double best = -1e9;
    for (int k = 0; k < 81; ++k) {
      std::vector<std::string> pick;
      for (int i = 0, v = k; i < 4; ++i, v /= 3) pick.push_back(names[v % 3]);
      if (static_cast<double>(ind.bytes(pick)) <= budget) best = std::max(best, ind.sqnr_of(pick));
    }
    std::cout << bits << " bits: chosen " << r.layers[0].chosen << " " << r.layers[1].chosen << " " << r.layers[2].chosen
              << " " << r.layers[3].chosen << ": " << r.measured_sqnr_db << " dB (best " << best << " dB)\n";
    ASSERT_TRUE(r.reached) << bits;
    EXPECT_LE(static_cast<double>(r.weight_bytes), budget) << bits;
    EXPECT_GE(r.measured_sqnr_db, std::min(best, 200.0) - 1.0) << bits;
    EXPECT_GE(r.measured_sqnr_db, r.uniform.at("w4").first) << bits;
    ASSERT_GE(r.front.size(), 2u);
    EXPECT_EQ(r.front.front().weight_bytes, ind.bytes({"float", "float", "float", "float"}));
    EXPECT_EQ(r.front.back().weight_bytes, ind.bytes({"w4", "w4", "w4", "w4"}));
  }
}

TEST(MixedPrecision, ReportsBudgetsItCannotMeetAndRefusesBadOptions) {
  Case c;
  const BackendConfig onednn = BackendConfig::resolve("onednn");
  MixedPrecisionOptions o = c.options(0);
  o.weight_bytes = 100;  // below every layer in w4
  const MixedPrecisionResult r = mixed_precision(*c.gm, weight_only(), onednn, batches_of(c.data, 16), o);
  EXPECT_FALSE(r.reached);
  for (const auto& l : r.layers) EXPECT_EQ(l.chosen, "w4") << l.layer;

  o.weight_bytes = 0;  // no budget at all
  EXPECT_THROW(mixed_precision(*c.gm, weight_only(), onednn, batches_of(c.data, 16), o), ArgumentError);
  o = c.options(6);
  o.candidates = {"w4", "w9"};
  EXPECT_THROW(mixed_precision(*c.gm, weight_only(), onednn, batches_of(c.data, 16), o), ConfigError);
  o.candidates = {"w4", "w4"};
  EXPECT_THROW(mixed_precision(*c.gm, weight_only(), onednn, batches_of(c.data, 16), o), ConfigError);
  // int16 outputs and int8 activations are noted as impossible for weight-only layers, not used.
  o.candidates = {"w4", "w8a16", "w8a8", "float"};
  const MixedPrecisionResult n = mixed_precision(*c.gm, weight_only(), onednn, batches_of(c.data, 16), o);
  int skipped = 0;
  for (const auto& note : n.notes) skipped += note.find("skipped: its activations are float") != std::string::npos;
  EXPECT_EQ(skipped, 8);
  for (const auto& l : n.layers) EXPECT_TRUE(l.chosen == "w4" || l.chosen == "float") << l.chosen;
  EXPECT_THROW(PrecisionCandidate::parse("w4a4", "k"), ConfigError);
  EXPECT_EQ(PrecisionCandidate::parse("w2a16", "k").activation_bits, 16);
}

// The mapping it returns prepares the model it measured: same output SQNR, with the
// chosen layers' weight FakeQuantizes at the chosen bits and blocks.
TEST(MixedPrecision, ReturnedMappingPreparesTheMeasuredModel) {
  Case c;
  const MixedPrecisionOptions o = c.options(5.5);
  const QConfigMapping m = weight_only();
  const MixedPrecisionResult r = mixed_precision(*c.gm, m, BackendConfig::resolve("onednn"), batches_of(c.data, 16), o);
  auto gm = prepared(c.net, with_mixed_precision(m, r, o), c.data);
  at::NoGradGuard ng;
  at::Tensor ref;
  {
    set_quant_state(*gm, QuantState::kFloat);
    ref = gm->forward(c.data);
    set_quant_state(*gm, QuantState::kFakeQuant);
    disable_observer(*gm);
  }
  EXPECT_NEAR(sqnr(ref, gm->forward(c.data)), r.measured_sqnr_db, 0.02);
  for (const auto& l : r.layers) {
    auto* f = dynamic_cast<FusedConvLinear*>(gm->get_submodule(l.layer).get());
    if (l.chosen == "float") {
      EXPECT_TRUE(f == nullptr || f->weight_fake_quant() == nullptr) << l.layer;
      continue;
    }
    ASSERT_NE(f, nullptr) << l.layer;
    const QuantSpec& s = f->weight_fake_quant()->observer().spec();
    EXPECT_EQ(s.bits(), l.chosen == "w4" ? 4 : 8) << l.layer;
    EXPECT_EQ(s.block_size, l.chosen == "w4" ? kBlock : 0) << l.layer;
  }
}

}  // namespace
