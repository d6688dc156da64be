// libFuzzer target: the .npy reader (qfx::runtime::load_npy).
#include <cstdint>

#include "fuzz_util.h"
#include "qfx/error.h"
#include "qfx/runtime/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qfx::fuzz::write_input(data, size, "input.npy");
  try {
    qfx::runtime::Tensor t = qfx::runtime::load_npy(path);
    volatile uint8_t sink = 0;  // touch every byte: the reader's size claims must hold
    const auto* p = static_cast<const uint8_t*>(t.raw());
    for (size_t i = 0; i < t.nbytes(); ++i) sink ^= p[i];
  } catch (const qfx::Error&) {
  }
  return 0;
}
