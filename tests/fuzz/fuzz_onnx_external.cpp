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
  static const std::string dir = std::filesystem::path(qfx::fuzz::write_input(nullptr, 0, "ext/.keep")).parent_path().string();
  const std::string path = qfx::fuzz::write_external_input(data, size, dir);
  if (path.empty()) return 0;
  try {
    qfx::fuzz::load_and_run_onnx_model(path);
  } catch (const qfx::Error& e) {
    qfx::fuzz::verbose(e);
  }
  return 0;
}
