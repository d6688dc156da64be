// QAT on a CUDA device through libtorch (training.device: cuda, or gm.to(kCUDA) in a
// user's loop) against the same steps on the CPU, and checkpoints that cross devices.
// Label cuda: without a device libtorch can use, each test reports skipped with the reason.
#include <gtest/gtest.h>
#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <filesystem>
#include <vector>

#include "qfx/fx/tracer.h"
#include "qfx/quant/calibrate.h"
#include "qfx/quant/checkpoint.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/torch_device.h"

using namespace qfx;
using namespace qfx::quant;

namespace {

struct NetImpl : torch::nn::Module {
  NetImpl() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1)));
    b1 = register_module("b1", torch::nn::BatchNorm2d(8));
    fc = register_module("fc", torch::nn::Linear(8 * 14 * 14, 10));
  }
  at::Tensor forward(const at::Tensor& x) {
    return fc->forward(torch::max_pool2d(torch::relu(b1->forward(c1->forward(x))), 2).flatten(1));
  }
  torch::nn::Conv2d c1{nullptr};
  torch::nn::BatchNorm2d b1{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

#define REQUIRE_TORCH_CUDA()                                                                        \
  do {                                                                                              \
    const std::string why = torch_device_unavailable_reason(c10::Device(c10::kCUDA));               \
    if (!why.empty()) GTEST_SKIP() << "no CUDA device for libtorch: " << why;                       \
    at::globalContext().setAllowTF32CuBLAS(false);                                                   \
    at::globalContext().setAllowTF32CuDNN(false);                                                    \
    at::globalContext().setDeterministicCuDNN(true);                                                 \
    at::globalContext().setBenchmarkCuDNN(false);                                                    \
  } while (0)

// A prepared QAT graph (learnable LSQ scales when `lsq`), the same for every call.
std::shared_ptr<fx::GraphModule> make(Net* keep, bool lsq) {
  auto q = std::make_shared<QConfig>();
  q->activation.learnable = lsq;
  QConfigMapping mapping = lsq ? QConfigMapping() : QConfigMapping::default_mapping();
  if (lsq) mapping.set_global(q);
  torch::manual_seed(0);
  *keep = Net();
  Net net = *keep;
  auto gm = fx::trace_module(net.ptr(), [net](std::vector<c10::IValue> in) mutable { return net->forward(in[0].toTensor()); },
                             {at::randn({2, 1, 28, 28})});
  prepare_qat_fx(*gm, mapping, BackendConfig::resolve("onednn"));
  gm->train();
  return gm;
}

struct Batches {
  std::vector<at::Tensor> x, y;
};
Batches batches(int n) {
  torch::manual_seed(3);
  Batches b;
  for (int i = 0; i < n; ++i) {
    b.x.push_back(at::randn({16, 1, 28, 28}));
    b.y.push_back(at::randint(10, {16}, at::kLong));
  }
  return b;
}

// Steps [from, to) on `device`; returns the losses.
std::vector<double> train(fx::GraphModule& gm, torch::optim::SGD& opt, const Batches& b, int from, int to, c10::Device device) {
  std::vector<double> losses;
  for (int s = from; s < to; ++s) {
    if (s >= to - 2) freeze_bn_stats(gm);
    opt.zero_grad();
    at::Tensor loss = torch::nn::functional::cross_entropy(gm.forward(b.x[s].to(device)), b.y[s].to(device));
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

double max_rel_diff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kCPU, at::kDouble), y = b.to(at::kCPU, at::kDouble);
  return ((x - y).abs().max() / y.abs().max().clamp_min(1e-12)).item<double>();
}

}  // namespace

TEST(CudaTraining, StepsOnTheGpuFollowTheCpu) {
  REQUIRE_TORCH_CUDA();
  const c10::Device cuda(c10::kCUDA);
  const Batches b = batches(8);
  for (bool lsq : {false, true}) {
    Net na{nullptr}, nb{nullptr};
    auto cpu = make(&na, lsq), gpu = make(&nb, lsq);
    gpu->to(cuda);
    for (const auto& m : gpu->modules())
      if (auto* fq = dynamic_cast<FakeQuantize*>(m.get())) {
        ASSERT_TRUE(fq->named_buffers(false)["zero_point"].is_cuda());
        ASSERT_TRUE(fq->observer().min_max().first.device().is_cpu()) << "statistics stay on the host";
      }
    torch::optim::SGD oc(cpu->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    torch::optim::SGD og(gpu->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    const std::vector<double> lc = train(*cpu, oc, b, 0, 8, c10::Device(c10::kCPU)), lg = train(*gpu, og, b, 0, 8, cuda);
    for (size_t s = 0; s < lc.size(); ++s) EXPECT_NEAR(lg[s], lc[s], 2e-2 * std::max(1.0, lc[s])) << "step " << s << " lsq " << lsq;
    for (const auto& kv : cpu->named_parameters())
      EXPECT_LT(max_rel_diff(gpu->named_parameters()[kv.key()], kv.value()), 2e-2) << kv.key() << " lsq " << lsq;
    const auto sc = cpu->modules(), sg = gpu->modules();
    ASSERT_EQ(sc.size(), sg.size());
    for (size_t i = 0; i < sc.size(); ++i)
      if (auto* fc = dynamic_cast<FakeQuantize*>(sc[i].get())) {
        auto* fg = dynamic_cast<FakeQuantize*>(sg[i].get());
        ASSERT_NE(fg, nullptr);
        EXPECT_LT(max_rel_diff(fg->observer().min_max().second, fc->observer().min_max().second), 2e-2);
        EXPECT_TRUE(fg->qparams().scale.device().is_cpu());
      }
  }
}

// A checkpoint saved on the GPU loads into a CPU model and into a GPU model, each left
// where it was; the GPU one then trains on exactly as the uninterrupted run.
TEST(CudaTraining, CheckpointsCrossDevices) {
  REQUIRE_TORCH_CUDA();
  const c10::Device cuda(c10::kCUDA);
  const Batches b = batches(6);
  Net na{nullptr}, nb{nullptr}, nc{nullptr};
  auto a = make(&na, true);
  a->to(cuda);
  torch::optim::SGD oa(a->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  train(*a, oa, b, 0, 3, cuda);
  const std::string path = (std::filesystem::temp_directory_path() / "qfx_cuda_checkpoint.pt").string();
  save_qat_checkpoint(path, *a, oa, 3);

  auto host = make(&nb, true);
  torch::optim::SGD oh(host->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  ASSERT_EQ(load_qat_checkpoint(path, *host, oh), 3);
  for (const auto& kv : host->named_parameters()) {
    EXPECT_TRUE(kv.value().device().is_cpu()) << kv.key();
    EXPECT_TRUE(at::equal(kv.value(), a->named_parameters()[kv.key()].cpu())) << kv.key();
  }

  auto dev = make(&nc, true);
  dev->to(cuda);
  torch::optim::SGD od(dev->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  ASSERT_EQ(load_qat_checkpoint(path, *dev, od), 3);
  train(*a, oa, b, 3, 6, cuda);
  train(*dev, od, b, 3, 6, cuda);
  for (const auto& kv : a->named_parameters()) {
    EXPECT_TRUE(dev->named_parameters()[kv.key()].is_cuda()) << kv.key();
    EXPECT_LT(max_rel_diff(dev->named_parameters()[kv.key()], kv.value()), 1e-6) << kv.key();
  }
  std::filesystem::remove(path);
}

// calibration.device: cuda: the float passes in libtorch on the GPU, histograms counted
// in place on the device; the statistics match a CPU calibration up to float rounding.
TEST(CudaTraining, CalibrationOnTheGpuMatchesTheCpu) {
  REQUIRE_TORCH_CUDA();
  const Batches b = batches(4);
  auto next = [&b]() {
    auto i = std::make_shared<size_t>(0);
    return NextBatch([&b, i]() -> std::vector<at::Tensor> { return *i < b.x.size() ? std::vector<at::Tensor>{b.x[(*i)++]} : std::vector<at::Tensor>{}; });
  };
  auto prepare = [](Net* keep) {
    torch::manual_seed(0);
    *keep = Net();
    Net net = *keep;
    net->eval();
    auto gm = fx::trace_module(net.ptr(), [net](std::vector<c10::IValue> in) mutable { return net->forward(in[0].toTensor()); },
                               {at::randn({2, 1, 28, 28})});
    prepare_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
    return gm;
  };
  Net na{nullptr}, nb{nullptr};
  auto cpu = prepare(&na), gpu = prepare(&nb);
  int histograms = 0;
  for (const auto& m : gpu->modules())
    if (auto* fq = dynamic_cast<FakeQuantize*>(m.get()))
      if (auto* h = dynamic_cast<HistogramObserver*>(&fq->observer())) h->set_count_on_gpu(true), ++histograms;
  ASSERT_GT(histograms, 2);
  CalibrateOptions oc;
  oc.input_shapes = {{16, 1, 28, 28}};
  CalibrateOptions og = oc;
  og.device = "cuda";
  calibrate(*cpu, next(), oc);
  const CalibrationResult r = calibrate(*gpu, next(), og);
  EXPECT_EQ(r.engine, "libtorch:cuda");
  EXPECT_EQ(r.images, 64);
  for (const auto& p : gpu->parameters()) EXPECT_TRUE(p.device().is_cpu()) << "the model returns to the host";
  const auto sc = cpu->modules(), sg = gpu->modules();
  ASSERT_EQ(sc.size(), sg.size());
  for (size_t i = 0; i < sc.size(); ++i) {
    auto* fc = dynamic_cast<FakeQuantize*>(sc[i].get());
    if (!fc) continue;
    auto* fg = dynamic_cast<FakeQuantize*>(sg[i].get());
    ASSERT_NE(fg, nullptr);
    const std::string name = fc->observer().tensor_name();
    EXPECT_LT(max_rel_diff(fg->observer().min_max().first, fc->observer().min_max().first), 1e-5) << name;
    EXPECT_LT(max_rel_diff(fg->observer().min_max().second, fc->observer().min_max().second), 1e-5) << name;
    if (auto* hc = dynamic_cast<HistogramObserver*>(&fc->observer()))
      EXPECT_EQ(hc->histogram().total(), dynamic_cast<HistogramObserver&>(fg->observer()).histogram().total()) << name;
    EXPECT_LT(max_rel_diff(fg->qparams().scale, fc->qparams().scale), 1e-2) << name;  // a bin count may differ
  }
}
