// libFuzzer target: the float ONNX reader (qfx::fx::load_onnx_model): parse,
// tensors, every converter and the shadow runs, then one forward of the graph
// (onnx_model_harness.h).
#include <cstdint>

#include "fuzz_util.h"
#include "onnx_model_harness.h"
#include "qfx/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qfx::fuzz::write_input(data, size, "input.onnx");
  try {
    qfx::fuzz::load_and_run_onnx_model(path);
  } catch (const qfx::Error&) {
  }
  return 0;
}
