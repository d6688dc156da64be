// GPTQ in a model (quant::gptq): the layers' codes are gptq_quantize's on the
// Hessians of their inputs in the quantized model (earlier layers already GPTQ'd),
// the weight FakeQuantizes hold GPTQ's qparams frozen and convert_fx exports those
// codes; conv layers are skipped; the ptq.gptq config section; AdaRound refuses
// block-wise weights. The algorithm itself is checked against an independent NumPy
// implementation of the paper by tests/quant/gptq_reference.py.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "qfx/error.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/job_config.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/ptq_algorithms.h"
#include "../common/next_batch.h"
#include "../common/weight_only.h"
#include "qfx/quant/quantized_modules.h"

using namespace qfx;
using namespace qfx::quant;
using qfx::test::batches_of;

namespace {

// x [N, T, 70] -> Linear a (70 -> 24, blocks 32, 32, 6) -> gelu -> Linear b (24 -> 6).
struct TwoLinearImpl : torch::nn::Module {
  TwoLinearImpl() {
    a = register_module("a", torch::nn::Linear(70, 24));
    b = register_module("b", torch::nn::Linear(24, 6));
  }
  at::Tensor forward(const at::Tensor& x) { return b->forward(torch::gelu(a->forward(x))); }
  torch::nn::Linear a{nullptr}, b{nullptr};
};
TORCH_MODULE(TwoLinear);

// 4-bit symmetric weights (block-wise when block > 0), float activations.
QConfigMapping weight_only(int64_t block) { return qfx::test::weight_only(4, block, {"Linear", "linear", "Conv2d"}); }

// Inputs with correlated features (what makes GPTQ differ from rounding to nearest).
at::Tensor correlated_inputs(int64_t n) {
  torch::manual_seed(5);
  const at::Tensor mix = at::eye(70) + 0.5 * at::randn({70, 70}) / std::sqrt(70.0);
  return at::matmul(at::randn({n, 4, 70}), mix) * at::rand({70}) * 3;
}

std::shared_ptr<fx::GraphModule> calibrated(TwoLinear net, int64_t block, const at::Tensor& data) {
  auto gm = fx::trace_module(net.ptr(), [net](std::vector<c10::IValue> in) mutable { return net->forward(in[0].toTensor()); },
                             {at::randn({2, 4, 70})});
  gm->eval();
  prepare_fx(*gm, weight_only(block), BackendConfig::resolve("onednn"));
  qfx::test::calibrate_on(*gm, data.slice(0, 0, 8));
  return gm;
}

FusedConvLinear& layer(fx::GraphModule& gm, const std::string& path) {
  auto* f = dynamic_cast<FusedConvLinear*>(gm.get_submodule(path).get());
  if (!f) throw std::runtime_error("no FusedConvLinear " + path);
  return *f;
}

// GPTQ on layer `path` of `gm` from outside: gptq_quantize on the Hessian of `x`
// with the layer's observed (pre-GPTQ) qparams.
GptqWeights expected(const at::Tensor& w, const at::Tensor& x, const QParams& observed, const QuantSpec& spec) {
  GptqHessian h(w.size(1));
  h.add(x);
  return gptq_quantize(w, h.hessian(), spec, observed);
}

void check_model(int64_t block) {
  torch::manual_seed(1);
  TwoLinear net;
  net->eval();
  const at::Tensor data = correlated_inputs(64);
  auto gm = calibrated(net, block, data);
  at::NoGradGuard ng;
  const at::Tensor wa = net->a->weight.detach().clone(), wb = net->b->weight.detach().clone();
  const QParams qa = layer(*gm, "a").weight_fake_quant()->qparams(), qb = layer(*gm, "b").weight_fake_quant()->qparams();
  const QuantSpec spec = layer(*gm, "a").weight_fake_quant()->observer().spec();
  GptqOptions o;
  o.num_samples = 48;  // the first 48 samples, in batches of 16
  int64_t calls = 0;
  o.progress = [&](const std::string&, int64_t done, int64_t total) {
    EXPECT_EQ(total, 2);
    EXPECT_EQ(done, ++calls);
  };
  const GptqResult r = gptq(*gm, batches_of(data, 16), o);
  ASSERT_EQ(r.layers.size(), 2u);
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(r.skipped.empty());
  for (const auto& l : r.layers) {
    std::cout << l.layer << ": relative error nearest " << l.error_nearest << ", GPTQ " << l.error_gptq << "\n";
    EXPECT_LT(l.error_gptq, l.error_nearest) << l.layer;
    EXPECT_EQ(l.rows, 48 * 4) << l.layer;
  }
  // Layer a reads the model input; layer b the output of a with GPTQ's weight (sequential).
  const at::Tensor x = data.slice(0, 0, 48);
  const GptqWeights ga = expected(wa, x, qa, spec);
  const at::Tensor xb = torch::gelu(at::linear(x, ga.weight.to(at::kFloat), net->a->bias));
  const GptqWeights gb = expected(wb, xb, qb, spec);
  auto converted = convert_fx(*gm);
  for (const auto& [path, g] : {std::pair<std::string, const GptqWeights&>{"a", ga}, {"b", gb}}) {
    FakeQuantize& fq = *layer(*gm, path).weight_fake_quant();
    EXPECT_TRUE(fq.qparams_frozen()) << path;
    EXPECT_TRUE(at::equal(fq.qparams().scale, g.qparams.scale)) << path;
    EXPECT_TRUE(at::equal(fq.qparams().zero_point, g.qparams.zero_point)) << path;
    const at::Tensor w = layer(*gm, path).weight();
    EXPECT_TRUE(at::equal(fq.forward(w), w)) << path << ": the weight is on its grid";
    auto* q = dynamic_cast<QuantizedConvLinear*>(converted->get_submodule(path).get());
    ASSERT_NE(q, nullptr) << path;
    EXPECT_TRUE(at::equal(q->weight_codes().to(at::kLong), g.codes)) << path << ": convert writes GPTQ's codes";
  }
  EXPECT_TRUE(at::equal(net->a->weight, wa)) << "the user's model keeps its float weight";
}

}  // namespace

TEST(Gptq, BlockWiseCodesAndQparamsReachTheConvertedModel) { check_model(32); }

TEST(Gptq, PerChannelCodesKeepTheObservedQparams) { check_model(0); }

TEST(Gptq, SkipsConvLayersAndChecksOptions) {
  auto net = std::make_shared<torch::nn::Module>();
  torch::nn::Conv2d conv = net->register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)));
  torch::nn::Linear fc = net->register_module("fc", torch::nn::Linear(4, 5));
  auto gm = fx::trace_module(net, [&](std::vector<c10::IValue> in) { return fc->forward(conv->forward(in[0].toTensor()).mean({2, 3})); },
                             {at::randn({2, 3, 8, 8})});
  gm->eval();
  prepare_fx(*gm, weight_only(0), BackendConfig::resolve("onednn"));
  const at::Tensor data = at::randn({16, 3, 8, 8});
  const GptqResult r = gptq(*gm, batches_of(data, 8));
  ASSERT_EQ(r.layers.size(), 1u);
  EXPECT_EQ(r.layers[0].layer, "fc");
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].first, "conv");
  EXPECT_NE(r.skipped[0].second.find("conv"), std::string::npos);
  GptqOptions bad;
  bad.damp = -1;
  EXPECT_THROW(gptq(*gm, batches_of(data, 8), bad), ArgumentError);
  EXPECT_THROW(gptq(*gm, batches_of(data.slice(0, 0, 0), 8)), ArgumentError);
  QuantSpec spec = QuantSpec::make(QDType::kInt8, QScheme::kSymmetric, 4);
  const QParams q = compute_qparams(at::full({}, -1.0), at::full({}, 1.0), spec);
  EXPECT_THROW(gptq_quantize(at::randn({4, 6}), at::eye(5), spec, q), ArgumentError);
  // Without damping, a Hessian that is not positive definite has no Cholesky factor.
  GptqOptions undamped;
  undamped.damp = 0;
  EXPECT_THROW(gptq_quantize(at::randn({4, 6}), -at::eye(6, at::kDouble), spec, q, undamped), DataError);
}

// F.linear on a parameter (as nn.MultiheadAttention's projections): GPTQ'd like a
// module, its new weight on a copy of the attribute, the user's parameter kept.
TEST(Gptq, FunctionalLinearsGetGptqCodes) {
  torch::manual_seed(2);
  auto net = std::make_shared<torch::nn::Module>();
  at::Tensor p = net->register_parameter("p", at::randn({24, 70}) / 8);
  torch::nn::Linear b = net->register_module("b", torch::nn::Linear(24, 6));
  auto gm = fx::trace_module(net, [&](std::vector<c10::IValue> in) { return b->forward(torch::gelu(at::linear(in[0].toTensor(), p))); },
                             {at::randn({2, 4, 70})});
  gm->eval();
  prepare_fx(*gm, weight_only(32), BackendConfig::resolve("onednn"));
  const at::Tensor data = correlated_inputs(32);
  {
    at::NoGradGuard ng;
    set_quant_state(*gm, QuantState::kCalibration);
    gm->forward(data.slice(0, 0, 8));
  }
  fx::Node* lin = nullptr;
  for (fx::Node* n : gm->graph().nodes())
    if (n->op() == fx::Opcode::kCallFunction && n->target().rfind("aten::linear", 0) == 0) lin = n;
  ASSERT_NE(lin, nullptr);
  fx::Node* fq_node = lin->args()[1].node;
  auto* fq = dynamic_cast<FakeQuantize*>(gm->get_submodule(fq_node->target()).get());
  ASSERT_NE(fq, nullptr);
  const at::Tensor user_p = p.detach().clone();
  const QParams observed = fq->qparams();
  GptqOptions o;
  o.num_samples = 16;
  const GptqResult r = gptq(*gm, batches_of(data, 8), o);
  ASSERT_EQ(r.layers.size(), 2u);
  EXPECT_EQ(r.layers[0].layer, lin->name());
  EXPECT_EQ(r.layers[1].layer, "b");
  EXPECT_LT(r.layers[0].error_gptq, r.layers[0].error_nearest);
  const GptqWeights want = expected(user_p, data.slice(0, 0, 16), observed, fq->observer().spec());
  const at::Tensor now = gm->get_attr(fq_node->args()[0].node->target());
  EXPECT_TRUE(at::equal(now, want.weight.to(at::kFloat))) << "the functional weight is GPTQ's";
  EXPECT_TRUE(fq->qparams_frozen());
  EXPECT_TRUE(at::equal(fq->qparams().scale, want.qparams.scale));
  EXPECT_TRUE(at::equal(p, user_p)) << "the user's parameter keeps its float values";
}

TEST(Gptq, AdaRoundRefusesBlockWiseWeights) {
  TwoLinear net;
  net->eval();
  const at::Tensor data = correlated_inputs(8);
  auto gm = calibrated(net, 32, data);
  try {
    adaround(*gm, batches_of(data, 8));
    FAIL() << "AdaRound ran on block-wise weights";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'a'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ptq.gptq"), std::string::npos) << e.what();
  }
}

TEST(Gptq, ConfigSection) {
  const std::string base = std::string(QFX_SOURCE_DIR) + "/configs/ptq/default.yaml";
  const auto on = load_job_config(base, {"ptq.gptq=true"});
  EXPECT_TRUE(on.ptq.gptq);
  EXPECT_EQ(on.ptq.gptq_options.damp, 0.01);
  EXPECT_EQ(on.ptq.gptq_options.lazy_batch, 128);
  EXPECT_FALSE(on.ptq.gptq_options.act_order);
  EXPECT_FALSE(load_job_config(base).ptq.gptq);
  const auto c = load_job_config(base, {"ptq.gptq={damp: 0.05, lazy_batch: 64, act_order: true, num_samples: 32}"});
  EXPECT_TRUE(c.ptq.gptq);
  EXPECT_EQ(c.ptq.gptq_options.damp, 0.05);
  EXPECT_EQ(c.ptq.gptq_options.lazy_batch, 64);
  EXPECT_TRUE(c.ptq.gptq_options.act_order);
  EXPECT_EQ(c.ptq.gptq_options.num_samples, 32);
  auto error = [&](const std::vector<std::string>& o) {
    try {
      load_job_config(base, o);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no ConfigError)");
  };
  EXPECT_NE(error({"ptq.gptq={damp: 2}"}).find("ptq.gptq.damp"), std::string::npos);
  EXPECT_NE(error({"ptq.gptq={lazy_batch: 0}"}).find("ptq.gptq.lazy_batch"), std::string::npos);
  EXPECT_NE(error({"ptq.gptq={dampening: 0.1}"}).find("unknown key 'dampening'"), std::string::npos);
  const std::string both = error({"ptq.gptq=true", "ptq.adaround=true"});
  EXPECT_NE(both.find("ptq.gptq and ptq.adaround"), std::string::npos) << both;
}
