// AWQ in a model (quant::awq): the float function is unchanged (1/s folded into a
// LayerNorm, or a Mul inserted before weight-only linears), the chosen ratio and the
// errors equal a search written here from the paper's formulas on inputs computed
// with the user's own modules, and quantized inputs that are not a LayerNorm are skipped.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <string>

#include "../common/next_batch.h"
#include "qfx/error.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/ptq_algorithms.h"

using namespace qfx;
using namespace qfx::quant;
using qfx::test::batches_of;

namespace {

// x [N, 4, 70] -> ln -> (a (70 -> 24) -> gelu -> b (24 -> 6)) ++ c (70 -> 8) ++ F.linear(ln, p) (70 -> 5).
struct NormNetImpl : torch::nn::Module {
  NormNetImpl() {
    ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({70})));
    a = register_module("a", torch::nn::Linear(70, 24));
    b = register_module("b", torch::nn::Linear(24, 6));
    c = register_module("c", torch::nn::Linear(70, 8));
    p = register_parameter("p", at::randn({5, 70}) / 8);
    at::NoGradGuard ng;
    ln->weight.copy_(0.5 + at::rand({70}));
    ln->weight.slice(0, 0, 4).mul_(12);  // salient channels of the norm's output
    ln->bias.copy_(0.1 * at::randn({70}));
    a->weight.slice(0, 0, 3).mul_(8);    // and of gelu(a(.))
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = ln->forward(x);
    return at::cat({b->forward(torch::gelu(a->forward(h))), c->forward(h), at::linear(h, p)}, -1);
  }
  torch::nn::LayerNorm ln{nullptr};
  at::Tensor p;
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr};
};
TORCH_MODULE(NormNet);

// 4-bit symmetric block-wise (32) weights; activations float (weight-only) or 8-bit.
QConfigMapping mapping(bool weight_only) {
  auto q = std::make_shared<QConfig>();
  q->activation.keep_float = weight_only;
  q->weight.per_channel = true;
  q->weight.block_size = weight_only ? 32 : 0;
  q->weight.bits = 4;
  q->weight.qscheme = QScheme::kSymmetric;
  q->weight.dtype = QDType::kInt8;
  QConfigMapping m;
  m.set_global(weight_only ? nullptr : q);
  m.set_object_type("Linear", q);
  m.set_object_type("linear", q);
  return m;
}

std::shared_ptr<fx::GraphModule> prepared(NormNet net, bool weight_only) {
  auto gm = fx::trace_module(net.ptr(), [net](std::vector<c10::IValue> in) mutable { return net->forward(in[0].toTensor()); },
                             {at::randn({2, 4, 70})});
  gm->eval();
  prepare_fx(*gm, mapping(weight_only), BackendConfig::resolve("onednn"));
  return gm;
}

at::Tensor float_output(fx::GraphModule& gm, const at::Tensor& x) {
  at::NoGradGuard ng;
  set_quant_state(gm, QuantState::kFloat);
  return gm.forward(x);
}

// Symmetric 4-bit nearest rounding per block of 32 along each row, torch.ao's qparams
// (scale = max|w| / 7.5 over the block, at least float32 eps; codes in [-8, 7]).
at::Tensor nearest_int4_blocks(const at::Tensor& w) {
  at::Tensor out = at::empty_like(w);
  for (int64_t j = 0; j < w.size(1); j += 32) {
    const at::Tensor blk = w.slice(1, j, std::min<int64_t>(j + 32, w.size(1)));
    const at::Tensor scale = (blk.abs().amax(1, true) / 7.5).clamp_min(std::numeric_limits<float>::epsilon());
    out.slice(1, j, j + blk.size(1)).copy_(at::clamp(at::round(blk / scale), -8, 7) * scale);
  }
  return out;
}

struct Search {
  double ratio = 0, error_nearest = 0, error_best = 0;
};

// The paper's search for one linear reading x ([rows, K]).
Search search(const at::Tensor& x, const at::Tensor& w, int64_t grid) {
  const at::Tensor m = x.abs().mean(0).clamp_min(1e-4);
  Search r;
  for (int64_t i = 0; i < grid; ++i) {
    const double ratio = static_cast<double>(i) / grid;
    at::Tensor s = at::pow(m, ratio);
    s = s / at::sqrt(s.max() * s.min());
    const at::Tensor wq = nearest_int4_blocks(w * s) / s;
    const double e = x.matmul((wq - w).t()).pow(2).mean().item<double>();
    if (i == 0) r.error_nearest = r.error_best = e;
    else if (e < r.error_best) r.error_best = e, r.ratio = ratio;
  }
  return r;
}

const AwqGroup* group_of(const AwqResult& r, const std::string& linear) {
  for (const auto& g : r.groups)
    for (const auto& l : g.linears)
      if (l == linear) return &g;
  return nullptr;
}

TEST(Awq, KeepsTheFloatFunctionAndMatchesThePapersSearch) {
  torch::manual_seed(3);
  NormNet net;
  net->eval();
  const at::Tensor x = at::randn({32, 4, 70});
  const at::Tensor user_ln = net->ln->weight.detach().clone(), user_b = net->b->weight.detach().clone();
  const at::Tensor user_p = net->p.detach().clone();
  auto gm = prepared(net, /*weight_only=*/true);
  const at::Tensor before = float_output(*gm, x);
  AwqOptions o;
  o.num_samples = 24;  // the first 24 samples, in batches of 8
  o.clip = false;      // clipping changes the float weights: WeightClippingMatchesTheSearchWrittenHere
  const AwqResult r = awq(*gm, batches_of(x, 8), o);
  EXPECT_TRUE(r.skipped.empty());
  ASSERT_EQ(r.groups.size(), 2u);
  const AwqGroup* norm = group_of(r, "a");
  const AwqGroup* gelu = group_of(r, "b");
  ASSERT_TRUE(norm && gelu);
  EXPECT_EQ(norm, group_of(r, "c")) << "a and c read the same norm output";
  EXPECT_EQ(norm->linears.size(), 3u) << "with the functional linear on p";
  EXPECT_EQ(norm->applied, "layer_norm");
  EXPECT_EQ(gelu->applied, "mul");
  for (const auto& g : r.groups) {
    EXPECT_GT(g.ratio, 0) << g.input;
    EXPECT_LE(g.error_awq, g.error_nearest) << g.input;
  }
  EXPECT_TRUE(at::allclose(float_output(*gm, x), before, 1e-4, 1e-5)) << "the float function is unchanged";
  // Layer b's search, from its input computed with the user's own modules.
  at::NoGradGuard ng;
  const at::Tensor xb = torch::gelu(net->a->forward(net->ln->forward(x.slice(0, 0, 24)))).reshape({-1, 24});
  const Search want = search(xb, user_b, o.grid);
  EXPECT_DOUBLE_EQ(gelu->ratio, want.ratio);
  EXPECT_NEAR(gelu->error_nearest, want.error_nearest, 1e-4 * want.error_nearest);
  EXPECT_NEAR(gelu->error_awq, want.error_best, 1e-4 * want.error_best);
  EXPECT_TRUE(at::equal(net->ln->weight, user_ln)) << "the user's norm keeps its weight";
  EXPECT_TRUE(at::equal(net->b->weight, user_b)) << "the user's linear keeps its weight";
  EXPECT_TRUE(at::equal(net->p, user_p)) << "the user's functional weight stays";
}

TEST(Awq, SkipsQuantizedInputsThatAreNotALayerNorm) {
  torch::manual_seed(4);
  NormNet net;
  net->eval();
  const at::Tensor x = at::randn({16, 4, 70});
  auto gm = prepared(net, /*weight_only=*/false);
  const at::Tensor before = float_output(*gm, x);
  AwqOptions o;
  o.clip = false;
  const AwqResult r = awq(*gm, batches_of(x, 8), o);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].first, "b");
  EXPECT_NE(r.skipped[0].second.find("is quantized"), std::string::npos) << r.skipped[0].second;
  const AwqGroup* norm = group_of(r, "a");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->applied, "layer_norm");
  EXPECT_TRUE(at::allclose(float_output(*gm, x), before, 1e-4, 1e-5));
}

// The clipping search written from the authors' description: per output row and
// block of 32 columns, max|w| of the scaled weight shrunk by 1 - i/20, i = 0..10,
// the shrink with the least mean squared output error of the block on x / s kept,
// the weight clamped to it.
at::Tensor clip_blocks(const at::Tensor& w, const at::Tensor& x) {
  at::Tensor out = w.clone();
  for (int64_t c = 0; c < w.size(1); c += 32) {
    const at::Tensor wb = w.slice(1, c, std::min<int64_t>(c + 32, w.size(1))), xb = x.slice(1, c, c + wb.size(1));
    const at::Tensor ref = xb.matmul(wb.t()), amax = wb.abs().amax(1, true);
    at::Tensor best = at::full({w.size(0)}, INFINITY), best_max = amax.clone();
    for (int i = 0; i <= 10; ++i) {
      const at::Tensor m = amax * (1.0 - i / 20.0);
      const at::Tensor err = (xb.matmul(nearest_int4_blocks(at::clamp(wb, -m, m)).t()) - ref).pow(2).mean(0);
      best_max = at::where((err < best).reshape({-1, 1}), m, best_max);
      best = at::minimum(err, best);
    }
    out.slice(1, c, c + wb.size(1)).copy_(at::clamp(wb, -best_max, best_max));
  }
  return out;
}

// The norm group (a, c and the functional linear on p read ln's output, upstream of
// every other change AWQ makes): each weight as the search written here clips it.
TEST(Awq, WeightClippingMatchesTheSearchWrittenHere) {
  torch::manual_seed(3);
  NormNet net;
  net->eval();
  const at::Tensor x = at::randn({32, 4, 70});
  const at::Tensor user_a = net->a->weight.detach().clone(), user_c = net->c->weight.detach().clone();
  auto gm = prepared(net, /*weight_only=*/true);
  AwqOptions o;
  o.num_samples = 24;
  const AwqResult r = awq(*gm, batches_of(x, 8), o);
  const AwqGroup* norm = group_of(r, "a");
  ASSERT_TRUE(norm);
  ASSERT_GT(norm->ratio, 0);
  at::NoGradGuard ng;
  const at::Tensor h = net->ln->forward(x.slice(0, 0, 24)).reshape({-1, 70});
  at::Tensor s = at::pow(h.abs().mean(0).clamp_min(1e-4), norm->ratio);
  s = s / at::sqrt(s.max() * s.min());
  double err = 0;
  for (const auto& [name, user] : {std::pair<std::string, at::Tensor>{"a", user_a}, {"c", user_c}}) {
    const at::Tensor want = clip_blocks(user * s, h / s);
    const at::Tensor got = std::dynamic_pointer_cast<FusedConvLinear>(gm->get_submodule(name))->weight().detach();
    EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-6)) << name << ": " << (got - want).abs().max().item<double>();
    EXPECT_FALSE(at::allclose(got, user * s)) << name << ": some blocks are clipped";
    err += (h / s).matmul((nearest_int4_blocks(want) - user * s).t()).pow(2).mean().item<double>();
  }
  EXPECT_LT(norm->error_clip, norm->error_awq) << "clipping lowers the output error here";
  EXPECT_GT(norm->error_clip, err) << "a and c's share, and p's";
  EXPECT_TRUE(at::equal(net->a->weight, user_a)) << "the user's linear keeps its weight";
}

TEST(Awq, RefusesABadGridAndNoData) {
  NormNet net;
  auto gm = prepared(net, true);
  AwqOptions o;
  o.grid = 0;
  EXPECT_THROW(awq(*gm, batches_of(at::randn({4, 4, 70}), 2), o), ArgumentError);
  EXPECT_THROW(awq(*gm, batches_of(at::randn({0, 4, 70}), 2)), ArgumentError);
  o.grid = 20;
  o.max_shrink = 1.5;
  EXPECT_THROW(awq(*gm, batches_of(at::randn({4, 4, 70}), 2), o), ArgumentError);
}

}  // namespace
