// libFuzzer target: the float ONNX reader (qfx::fx::load_onnx_model): parse,
// tensors, every converter and the shadow runs, then one forward of the graph
// on zeros of the traced shapes.
#include <ATen/ATen.h>

#include <cstdint>

#include "fuzz_util.h"
#include "qfx/error.h"
#include "qfx/fx/onnx_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qfx::fuzz::write_input(data, size, "input.onnx");
  try {
    auto gm = qfx::fx::load_onnx_model(path);
    std::vector<c10::IValue> inputs;
    for (const auto* p : gm->graph().placeholders()) {
      std::vector<int64_t> shape = p->meta().at("traced_shape").toIntVector();
      for (auto& d : shape) d = d < 0 ? 1 : d;
      inputs.emplace_back(at::zeros(shape));
    }
    at::NoGradGuard ng;
    gm->forward(inputs);
  } catch (const qfx::Error&) {
  }
  return 0;
}
