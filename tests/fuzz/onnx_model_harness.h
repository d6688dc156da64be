// What the float ONNX reader's fuzz target does with one file, shared with the test
// that replays its findings (tests/fx/onnx_model_test.cpp): load_onnx_model, then one
// forward of the graph on zeros of the traced shapes (dynamic dims as 1).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "qfx/fx/onnx_model.h"

namespace qfx::fuzz {

/// Reads the ONNX model at `path` into a GraphModule and runs it once. Throws what
/// the reader and the Interpreter throw (qfx::Error for bad models: anything else
/// is a finding).
inline void load_and_run_onnx_model(const std::string& path) {
  auto gm = qfx::fx::load_onnx_model(path);
  std::vector<c10::IValue> inputs;
  for (const auto* p : gm->graph().placeholders()) {
    std::vector<int64_t> shape = p->meta().at("traced_shape").toIntVector();
    for (auto& d : shape) d = d < 0 ? 1 : d;
    inputs.emplace_back(at::zeros(shape));
  }
  at::NoGradGuard ng;
  gm->forward(inputs);
}

}  // namespace qfx::fuzz
