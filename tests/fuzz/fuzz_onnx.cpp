// libFuzzer target: the ONNX loader (parse, QDQ matching, planning) and one run
// on zero inputs of the declared shapes (onnx_harness.h).
#include <cstdint>
#include <string>

#include "onnx_harness.h"
#include "qfx/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    qfx::fuzz::load_and_run_onnx(std::string(reinterpret_cast<const char*>(data), size), "<fuzz input>");
  } catch (const qfx::Error&) {
  }
  return 0;
}
