// prepare_qat_fx in a plain libtorch training loop on real data (Fashion-MNIST):
// the loss falls and the fake-quantized model classifies well.
#include <gtest/gtest.h>

#include "../common/scratch_dir.h"
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <ATen/ATen.h>

#include <filesystem>
#include <iostream>
#include <numeric>

#include "qfx/fx/tracer.h"
#include "qfx/error.h"
#include "qfx/quant/checkpoint.h"
#include "qfx/quant/data.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/passes.h"

using namespace qfx;
using namespace qfx::quant;

namespace {

struct SmallCnnImpl : torch::nn::Module {
  SmallCnnImpl() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)));
    b1 = register_module("b1", torch::nn::BatchNorm2d(16));
    c2 = register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)));
    b2 = register_module("b2", torch::nn::BatchNorm2d(32));
    fc = register_module("fc", torch::nn::Linear(32 * 7 * 7, 10));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::max_pool2d(torch::relu(b1->forward(c1->forward(x))), 2);
    y = torch::max_pool2d(torch::relu(b2->forward(c2->forward(y))), 2);
    return fc->forward(y.flatten(1));
  }
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::BatchNorm2d b1{nullptr}, b2{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(SmallCnn);

}  // namespace

TEST(QatTraining, FashionMnistLossFallsInAPlainLoop) {
  const std::string dir = fashion_mnist_dir();
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (tools/install_deps.sh installs dataset-fashion-mnist)";
  at::Tensor images = load_idx_images(dir + "/train-images-idx3-ubyte.gz", 6400, 0.2860, 0.3530);
  at::Tensor labels = load_idx_labels(dir + "/train-labels-idx1-ubyte.gz", 6400);
  at::Tensor test_x = load_idx_images(dir + "/t10k-images-idx3-ubyte.gz", 1000, 0.2860, 0.3530);
  at::Tensor test_y = load_idx_labels(dir + "/t10k-labels-idx1-ubyte.gz", 1000);
  ASSERT_EQ(images.sizes(), (std::vector<int64_t>{6400, 1, 28, 28}));

  torch::manual_seed(0);
  SmallCnn net;
  net->eval();
  auto gm = fx::trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); },
                             {images.slice(0, 0, 2)});
  prepare_qat_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  torch::optim::SGD opt(gm->parameters(), torch::optim::SGDOptions(0.02).momentum(0.9));

  const int64_t steps = 300, batch = 64;
  std::vector<double> losses;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t off = (s * batch) % images.size(0);
    at::Tensor x = images.slice(0, off, off + batch), y = labels.slice(0, off, off + batch);
    opt.zero_grad();
    at::Tensor loss = torch::nn::functional::cross_entropy(gm->forward(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
    if (s == 200) freeze_bn_stats(*gm);
    if (s == 250) disable_observer(*gm);
  }
  auto mean = [](auto b, auto e) { return std::accumulate(b, e, 0.0) / static_cast<double>(e - b); };
  const double first = mean(losses.begin(), losses.begin() + 20), last = mean(losses.end() - 20, losses.end());
  EXPECT_LT(last, 0.5 * first) << "loss " << first << " -> " << last;

  gm->eval();
  at::NoGradGuard ng;
  const double acc = gm->forward(test_x).argmax(1).eq(test_y).to(at::kDouble).mean().item<double>();
  set_quant_state(*gm, QuantState::kFloat);
  const double acc_float = gm->forward(test_x).argmax(1).eq(test_y).to(at::kDouble).mean().item<double>();
  std::cout << "loss " << first << " -> " << last << ", test accuracy fake-quant " << acc << ", float " << acc_float << "\n";
  EXPECT_GT(acc, 0.70) << "fake-quant test accuracy after " << steps << " steps";
  RecordProperty("fake_quant_accuracy", std::to_string(acc));
}

// Stopping after step 3, saving a checkpoint, and resuming in a fresh process-like
// setup (new C++ model, new trace, new optimizer) gives exactly the parameters,
// buffers (batch norm, observers, fake-quant state, learnt LSQ scales) and outputs
// of a run that never stopped. The model is a torch::nn::Module defined in C++.
TEST(QatTraining, CheckpointResumeEqualsUninterruptedRun) {
  std::vector<std::pair<at::Tensor, at::Tensor>> batches;
  torch::manual_seed(1);
  for (int i = 0; i < 6; ++i) batches.emplace_back(at::randn({8, 1, 28, 28}), at::randint(10, {8}, at::kLong));
  auto q = std::make_shared<QConfig>();
  q->activation.learnable = true;  // LSQ scales are parameters: the optimizer state covers them too
  QConfigMapping mapping;
  mapping.set_global(q);
  auto make = [&](SmallCnn* keep) {
    torch::manual_seed(0);
    *keep = SmallCnn();
    SmallCnn net = *keep;
    auto gm = fx::trace_module(net.ptr(), [net](std::vector<c10::IValue> in) mutable { return net->forward(in[0].toTensor()); },
                               {at::randn({2, 1, 28, 28})});
    prepare_qat_fx(*gm, mapping, BackendConfig::resolve("onednn"));
    gm->train();
    return gm;
  };
  auto train = [&](fx::GraphModule& gm, torch::optim::SGD& opt, int from, int to) {
    for (int s = from; s < to; ++s) {
      if (s >= 3) freeze_bn_stats(gm);
      if (s >= 4) disable_observer(gm);
      opt.zero_grad();
      torch::nn::functional::cross_entropy(gm.forward(batches[s].first), batches[s].second).backward();
      opt.step();
    }
  };
  SmallCnn net_a{nullptr}, net_b{nullptr}, net_c{nullptr};
  auto a = make(&net_a);
  torch::optim::SGD opt_a(a->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  train(*a, opt_a, 0, 6);

  auto b = make(&net_b);
  torch::optim::SGD opt_b(b->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  train(*b, opt_b, 0, 3);
  const std::string path = (std::filesystem::path(qfx::test::scratch_path()) / "qfx_qat_checkpoint.pt").string();
  save_qat_checkpoint(path, *b, opt_b, 3);

  auto c = make(&net_c);
  torch::optim::SGD opt_c(c->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  ASSERT_EQ(load_qat_checkpoint(path, *c, opt_c), 3);
  train(*c, opt_c, 3, 6);

  auto pa = a->named_parameters(), pc = c->named_parameters();
  ASSERT_EQ(pa.size(), pc.size());
  int learnable_scales = 0;
  for (const auto& kv : pa) {
    EXPECT_TRUE(at::equal(kv.value(), pc[kv.key()])) << kv.key();
    learnable_scales += kv.key().find("scale") != std::string::npos;
  }
  EXPECT_GT(learnable_scales, 3);
  auto ba = a->named_buffers(), bc = c->named_buffers();
  ASSERT_EQ(ba.size(), bc.size());
  for (const auto& kv : ba) EXPECT_TRUE(at::equal(kv.value(), bc[kv.key()])) << kv.key();
  a->eval();
  c->eval();
  at::NoGradGuard ng;
  at::Tensor x = at::randn({4, 1, 28, 28});
  EXPECT_TRUE(at::equal(a->forward(x), c->forward(x)));
  // A checkpoint of another graph is refused, naming the file.
  torch::manual_seed(0);
  SmallCnn other;
  auto g2 = fx::trace_module(other.ptr(), [other](std::vector<c10::IValue> in) mutable { return other->forward(in[0].toTensor()); },
                             {at::randn({2, 1, 28, 28})});
  prepare_qat_fx(*g2, QConfigMapping::default_mapping(), BackendConfig::resolve("example_accel"));
  torch::optim::SGD opt2(g2->parameters(), torch::optim::SGDOptions(0.01));
  try {
    load_qat_checkpoint(path, *g2, opt2);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("qfx_qat_checkpoint.pt"), std::string::npos) << e.what();
  }
  // A file with the checkpoint's keys but a wrong type is refused, naming the file.
  {
    torch::serialize::OutputArchive bad, m, o;
    bad.write("graph_hash", c10::IValue(int64_t{42}));
    bad.write("step", c10::IValue(int64_t{3}));
    bad.write("model", m);
    bad.write("optimizer", o);
    bad.save_to(path);
    try {
      load_qat_checkpoint(path, *c, opt_c);
      FAIL() << "expected IoError";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("'graph_hash' must be a string"), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove(path);
}
