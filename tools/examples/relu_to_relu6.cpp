// torch.fx's replace_pattern example in C++: every ReLU of a traced model becomes
// a ReLU6 (hardtanh(x, 0, 6)), because the target chip clips at 6.
//
//   relu_to_relu6
//
// Traces a small CNN that calls torch::relu, prints its graph, replaces the
// pattern, prints the graph again, and checks the rewritten graph's output
// against libtorch running the same model written with ReLU6 (exit 1 if not equal).
#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <cstdio>
#include <iostream>

#include "qfx/fx/subgraph_rewriter.h"
#include "qfx/fx/tracer.h"

struct NetImpl : torch::nn::Module {
  NetImpl() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)));
    c2 = register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 8, 3).padding(1)));
    fc = register_module("fc", torch::nn::Linear(8, 4));
  }
  at::Tensor forward(at::Tensor x, bool relu6 = false) {
    auto act = [relu6](const at::Tensor& t) { return relu6 ? torch::hardtanh(t, 0, 6) : torch::relu(t); };
    x = act(c1->forward(x) * 4.0);  // scaled so that some values exceed 6
    x = act(c2->forward(x) * 4.0);
    return fc->forward(x.mean({2, 3}));
  }
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

int main() {
  torch::manual_seed(0);
  Net net;
  net->eval();
  const at::Tensor x = torch::randn({2, 3, 16, 16});
  auto gm = qfx::fx::trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); }, {x});
  std::cout << "before:\n" << gm->code() << "\n";

  auto replaced = qfx::fx::replace_pattern(
      *gm, [](const std::vector<at::Tensor>& in) { return torch::relu(in[0]); },
      [](const std::vector<at::Tensor>& in) { return torch::hardtanh(in[0], 0, 6); });
  std::cout << "after (" << replaced.size() << " replaced):\n" << gm->code() << "\n";

  torch::NoGradGuard ng;
  const at::Tensor got = gm->forward(x), want = net->forward(x, /*relu6=*/true), relu = net->forward(x);
  const bool equal = at::allclose(got, want, 1e-5, 1e-6), differs = !at::allclose(got, relu, 1e-5, 1e-6);
  int relus = 0;
  for (auto* n : gm->graph().nodes()) relus += n->target().rfind("aten::relu", 0) == 0;
  std::printf("replaced %zu, relu left %d, equals libtorch ReLU6 model: %s, differs from the ReLU model: %s\n",
              replaced.size(), relus, equal ? "yes" : "no", differs ? "yes" : "no");
  return replaced.size() == 2 && relus == 0 && equal && differs ? 0 : 1;
}
