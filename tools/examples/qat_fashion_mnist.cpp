// Quantization-aware training in a plain libtorch loop: the example of the README.
//
//   qat_fashion_mnist MODEL.pt OUT_DIR [STEPS] [TRAIN_IMAGES] [TEST_IMAGES]
//
// Loads a TorchScript Fashion-MNIST model, traces it, prepares it for QAT with 4-bit
// per-tensor weights and 8-bit activations on the onednn backend, fine-tunes it with
// SGD (batch norm frozen after 60 % of the steps, observers after 80 %), evaluates the
// fake-quantized model, and converts it to OUT_DIR/model_int8.onnx + encodings.json. Data: Debian's
// dataset-fashion-mnist.
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "qfx/fx/tracer.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/data.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/passes.h"

using namespace qfx;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.pt OUT_DIR [STEPS] [TRAIN_IMAGES] [TEST_IMAGES]\n", argv[0]);
    return 2;
  }
  const std::string out_dir = argv[2];
  const int64_t steps = argc > 3 ? std::atoll(argv[3]) : 1000;
  const int64_t n_train = argc > 4 ? std::atoll(argv[4]) : 0, n_test = argc > 5 ? std::atoll(argv[5]) : 0;
  const std::string data = quant::fashion_mnist_dir();
  at::Tensor x = quant::load_idx_images(data + "/train-images-idx3-ubyte.gz", n_train, 0.2860, 0.3530);
  at::Tensor y = quant::load_idx_labels(data + "/train-labels-idx1-ubyte.gz", n_train);
  at::Tensor tx = quant::load_idx_images(data + "/t10k-images-idx3-ubyte.gz", n_test, 0.2860, 0.3530);
  at::Tensor ty = quant::load_idx_labels(data + "/t10k-labels-idx1-ubyte.gz", n_test);

  // 1. Trace and prepare: 4-bit per-tensor weights, 8-bit activations.
  torch::manual_seed(0);
  auto model = fx::trace_file(argv[1]);
  auto q = std::make_shared<quant::QConfig>();
  q->weight.bits = 4;
  q->weight.per_channel = false;
  quant::QConfigMapping mapping;
  mapping.set_global(q);
  auto backend = quant::BackendConfig::resolve("onednn");
  quant::prepare_qat_fx(*model, mapping, backend);

  // 2. Train: an ordinary libtorch loop over the prepared module's parameters.
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.005).momentum(0.9));
  const int64_t batch = 64;
  model->train();
  for (int64_t step = 0; step < steps; ++step) {
    if (step == steps * 6 / 10) quant::freeze_bn_stats(*model);   // batch norm: running statistics from now on
    if (step == steps * 8 / 10) quant::disable_observer(*model);  // qparams fixed from now on
    at::Tensor idx = at::randint(x.size(0), {batch}, at::kLong);
    opt.zero_grad();
    at::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x.index_select(0, idx)), y.index_select(0, idx));
    loss.backward();
    opt.step();
    if (step % 100 == 0 || step == steps - 1)
      std::printf("step %4lld  loss %.4f\n", static_cast<long long>(step), loss.item<double>());
  }

  // 3. Evaluate with fake quantization, then convert to the deployable int8 model.
  model->eval();
  quant::disable_observer(*model);
  at::NoGradGuard no_grad;
  const double acc = model->forward(tx).argmax(1).eq(ty).to(at::kDouble).mean().item<double>();
  std::printf("fake-quant top-1 on %lld test images: %.2f%%\n", static_cast<long long>(tx.size(0)), 100 * acc);
  std::filesystem::create_directories(out_dir);
  quant::ExportOptions co;
  co.input_shapes = {{-1, 1, 28, 28}};
  co.input_names = {"input"};
  auto converted = quant::convert_fx(*model);  // the reference quantized model, runnable here
  const double acc_conv = converted->forward(tx).argmax(1).eq(ty).to(at::kDouble).mean().item<double>();
  std::printf("converted model top-1 in libtorch: %.2f%%\n", 100 * acc_conv);
  auto result = quant::export_onnx(*converted, out_dir + "/model_int8.onnx", co);
  quant::write_encodings(out_dir + "/encodings.json", result, quant::graph_hash(*model), backend.name);
  std::printf("wrote %s/model_int8.onnx and encodings.json: %d int8 weights, %zu quantized activations\n", out_dir.c_str(),
              result.quantized_weights, result.encodings.size());
  return 0;
}
