// prepare_qat_fx in a plain libtorch training loop on real data (Fashion-MNIST):
// the loss falls and the fake-quantized model classifies well.
#include <gtest/gtest.h>
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
