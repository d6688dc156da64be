// What the float ONNX reader's fuzz target does with one file, shared with the test
// that replays its findings (tests/fx/onnx_model_test.cpp): load_onnx_model, then one
// forward of the graph on zeros of the traced shapes (dynamic dims as 1).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
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

/// Writes an external-data fuzz input ([u32 little-endian model length][model.onnx
/// bytes][weights.bin bytes]) as `dir`/model.onnx and `dir`/weights.bin (`dir`
/// created) and returns the model's path; "" for an input shorter than 4 bytes.
inline std::string write_external_input(const uint8_t* data, size_t size, const std::string& dir) {
  if (size < 4) return "";
  const size_t n = std::min<size_t>(size - 4, data[0] | data[1] << 8 | data[2] << 16 | static_cast<size_t>(data[3]) << 24);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/model.onnx", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data + 4), static_cast<std::streamsize>(n));
  std::ofstream(dir + "/weights.bin", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data + 4 + n), static_cast<std::streamsize>(size - 4 - n));
  return dir + "/model.onnx";
}

}  // namespace qfx::fuzz
