// Tracing C++ torch::nn::Modules with example inputs, and fx::wrap.
#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <ATen/ATen.h>

#include <set>
#include <sstream>

#include "qfx/error.h"
#include "qfx/fx/tracer.h"

using namespace qfx::fx;

namespace {

// Post-processing kept whole: data-dependent in spirit (a top-k mask).
const WrappedFunction& keep_top2() {
  static WrappedFunction f = wrap("keep_top2_test", [](const std::vector<at::Tensor>& in) {
    at::Tensor x = in.at(0);
    auto kth = std::get<0>(x.topk(2, 1)).select(1, 1).unsqueeze(1);
    return std::vector<at::Tensor>{x * (x >= kth).to(x.scalar_type())};
  });
  return f;
}

struct NetImpl : torch::nn::Module {
  NetImpl() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 6, 3).padding(1)));
    bn = register_module("bn", torch::nn::BatchNorm2d(6));
    fc = register_module("fc", torch::nn::Linear(6 * 8 * 8, 5));
    gain = register_parameter("gain", torch::ones({1}) * 1.5);
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::relu(bn->forward(conv->forward(x)));
    y = fc->forward(y.flatten(1)) * gain;
    return keep_top2()(y);
  }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Linear fc{nullptr};
  at::Tensor gain;
};
TORCH_MODULE(Net);

}  // namespace

TEST(CxxTrace, ConvBnLinearAreCallModulesOnTheSameSubmodules) {
  torch::manual_seed(0);
  Net net;
  {
    at::NoGradGuard ng;
    net->bn->running_mean.uniform_(-0.2, 0.2);
    net->bn->running_var.uniform_(0.5, 1.5);
  }
  net->eval();
  at::Tensor x = torch::randn({4, 3, 8, 8});
  auto gm = trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return c10::IValue(net->forward(in[0].toTensor())); },
                         {x});
  std::set<std::string> modules, functions, attrs;
  for (const Node* n : gm->graph().nodes()) {
    if (n->op() == Opcode::kCallModule) modules.insert(n->target());
    if (n->op() == Opcode::kCallFunction) functions.insert(n->target());
    if (n->op() == Opcode::kGetAttr) attrs.insert(n->target());
  }
  EXPECT_EQ(modules, (std::set<std::string>{"conv", "bn", "fc"})) << [&] { std::ostringstream os; gm->print_tabular(os); return os.str(); }();
  EXPECT_TRUE(functions.count("qfx_wrap::keep_top2_test")) << "wrapped C++ function is one node";
  EXPECT_FALSE(functions.count("aten::topk")) << "the wrapped function's body is not in the graph";
  EXPECT_TRUE(attrs.count("gain"));
  EXPECT_EQ(gm->get_submodule("conv").get(), net->conv.ptr().get());

  // Same numbers as the module itself, new inputs of another batch size.
  at::Tensor x2 = torch::randn({2, 3, 8, 8});
  at::Tensor expect = net->forward(x2);
  at::Tensor got = gm->forward(x2);
  EXPECT_TRUE(at::allclose(got, expect, 1e-5, 1e-6));
  EXPECT_GT((got == 0).sum().item<int64_t>(), 0);  // the top-2 mask ran

  // Gradients reach the shared parameters through the wrapped op too.
  net->zero_grad();
  gm->forward(x2).sum().backward();
  EXPECT_TRUE(net->conv->weight.grad().defined());
  EXPECT_GT(net->fc->weight.grad().abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(net->gain.grad().defined());
}

TEST(CxxTrace, WrapRejectsBadAndDuplicateNames) {
  (void)keep_top2();
  EXPECT_THROW(wrap("keep_top2_test", [](const std::vector<at::Tensor>& v) { return v; }), qfx::ConfigError);
  EXPECT_THROW(wrap("not valid", [](const std::vector<at::Tensor>& v) { return v; }), qfx::ConfigError);
}

TEST(CxxTrace, WrappedFunctionRunsEagerly) {
  at::Tensor x = torch::tensor({{1.0f, 5.0f, 3.0f, 4.0f}});
  at::Tensor y = keep_top2()(x);
  EXPECT_TRUE(at::equal(y, torch::tensor({{0.0f, 5.0f, 0.0f, 4.0f}})));
}
