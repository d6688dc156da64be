// torch.fx's conv + batch-norm fusion example, written as a user pass with qfx's
// module-pattern matcher.
//
//   fuse_conv_bn
//
// Every Conv2d -> BatchNorm2d chain of a traced model becomes one Conv2d with the
// batch norm folded into its weight and bias:
//   w' = w * gamma / sqrt(var + eps),  b' = (b - mean) * gamma / sqrt(var + eps) + beta.
// Checks the fused graph against the unfused model in libtorch (exit 1 if not
// within 1e-5 relative) and prints both graphs.
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include <cstdio>
#include <iostream>

#include "qfx/fx/module_matcher.h"
#include "qfx/fx/tracer.h"

struct NetImpl : torch::nn::Module {
  NetImpl() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)));
    b1 = register_module("b1", torch::nn::BatchNorm2d(8));
    c2 = register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 8, 3).padding(1).bias(false)));
    b2 = register_module("b2", torch::nn::BatchNorm2d(8));
  }
  at::Tensor forward(at::Tensor x) { return b2->forward(c2->forward(torch::relu(b1->forward(c1->forward(x))))); }
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::BatchNorm2d b1{nullptr}, b2{nullptr};
};
TORCH_MODULE(Net);

// The folded copy of `conv` (a new module; the original is left as it was).
torch::nn::Conv2d fold(const torch::nn::Conv2d& conv, const torch::nn::BatchNorm2d& bn) {
  torch::NoGradGuard ng;
  const auto& o = conv->options;
  torch::nn::Conv2d fused(torch::nn::Conv2dOptions(o.in_channels(), o.out_channels(), o.kernel_size())
                              .stride(o.stride())
                              .padding(o.padding())
                              .dilation(o.dilation())
                              .groups(o.groups())
                              .bias(true)
                              .padding_mode(o.padding_mode()));
  const at::Tensor k = bn->weight / torch::sqrt(bn->running_var + bn->options.eps());
  fused->weight.copy_(conv->weight * k.reshape({-1, 1, 1, 1}));
  const at::Tensor b = conv->bias.defined() ? conv->bias : torch::zeros_like(bn->running_mean);
  fused->bias.copy_((b - bn->running_mean) * k + bn->bias);
  return fused;
}

int main() {
  torch::manual_seed(0);
  Net net;
  {  // give the batch norms non-trivial statistics
    torch::NoGradGuard ng;
    net->train();
    for (int i = 0; i < 4; ++i) net->forward(torch::randn({8, 3, 12, 12}) * 2 + 0.5);
  }
  net->eval();
  const at::Tensor x = torch::randn({2, 3, 12, 12});
  auto gm = qfx::fx::trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); }, {x});
  std::cout << "before:\n" << gm->code() << "\n";

  int fused = 0;
  for (const auto& chain : qfx::fx::match_module_pattern(*gm, {"Conv2d", "BatchNorm2d"})) {
    auto conv = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(gm->get_submodule(chain[0]->target()));
    auto bn = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(gm->get_submodule(chain[1]->target()));
    torch::nn::Conv2d f = fold(torch::nn::Conv2d(conv), torch::nn::BatchNorm2d(bn));
    gm->replace_submodule(chain[0]->target(), f.ptr(),
                          [m = f.ptr()](std::vector<c10::IValue>& a) { return c10::IValue(m->forward(a[0].toTensor())); });
    chain[1]->replace_all_uses_with(chain[0]);
    const std::string bn_path = chain[1]->target();
    gm->graph().erase_node(chain[1]);
    gm->remove_submodule(bn_path);
    ++fused;
  }
  gm->graph().lint();
  std::cout << "after (" << fused << " fused):\n" << gm->code() << "\n";

  torch::NoGradGuard ng;
  const at::Tensor got = gm->forward(x), want = net->forward(x);
  const double rel = (got - want).abs().max().item<double>() / want.abs().max().item<double>();
  std::printf("fused %d conv+bn pairs, max relative difference to the unfused model %.3g\n", fused, rel);
  return fused == 2 && rel < 1e-5 ? 0 : 1;
}
