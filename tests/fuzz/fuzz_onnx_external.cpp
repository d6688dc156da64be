// libFuzzer target: ONNX models with external data, through the float ONNX reader
// (qfx::fx::load_onnx_model) and one forward of the graph. The input is
// [u32 little-endian model length][model.onnx bytes][weights.bin bytes]: both files
// are written into one folder, so mutations reach the tensors' `location`,
// `offset` and `length` entries and the data they point at.
#include <cstdint>

#include "fuzz_util.h"
#include "onnx_model_harness.h"
#include "qfx/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const size_t n = std::min<size_t>(size - 4, data[0] | data[1] << 8 | data[2] << 16 | static_cast<size_t>(data[3]) << 24);
  const std::string path = qfx::fuzz::write_input(data + 4, n, "ext/model.onnx");
  qfx::fuzz::write_input(data + 4 + n, size - 4 - n, "ext/weights.bin");
  try {
    qfx::fuzz::load_and_run_onnx_model(path);
  } catch (const qfx::Error& e) {
    qfx::fuzz::verbose(e);
  }
  return 0;
}
