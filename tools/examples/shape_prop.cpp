// torch.fx's ShapeProp example: shapes and dtypes of every node of a model.
//
//   shape_prop MODEL.pt [N C H W]      (default input 1 3 224 224)
//
// Traces a TorchScript model (e.g. torchvision's resnet18), runs ShapeProp on a
// zero input and prints the graph's table with the shape and dtype of each node.
// Checks that the recorded output shape is the shape libtorch's TorchScript module
// returns (exit 1 if not).
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "qfx/fx/shape_prop.h"
#include "qfx/fx/tracer.h"

namespace {
std::string join(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 6) {
    std::fprintf(stderr, "usage: %s MODEL.pt [N C H W]\n", argv[0]);
    return 2;
  }
  std::vector<int64_t> shape{1, 3, 224, 224};
  if (argc == 6)
    for (int i = 0; i < 4; ++i) shape[static_cast<size_t>(i)] = std::atoll(argv[i + 2]);
  torch::jit::Module ts = qfx::fx::load_torchscript(argv[1]);
  ts.eval();
  auto gm = qfx::fx::QuantizationTracer().trace(ts);
  gm->eval();
  qfx::fx::propagate_shapes(*gm, {shape});
  gm->graph().print_tabular(std::cout);

  const qfx::fx::Node* out = gm->graph().output_node();
  const auto& recorded = out->args()[0].node->meta().at("shape");
  torch::NoGradGuard ng;
  const at::Tensor y = ts.forward({at::zeros(shape)}).toTensor();
  const bool same = recorded.toIntVector() == y.sizes().vec();
  std::printf("output shape recorded %s, libtorch %s: %s\n", join(recorded.toIntVector()).c_str(),
              join(y.sizes().vec()).c_str(), same ? "equal" : "DIFFERENT");
  return same ? 0 : 1;
}
