// libFuzzer target: the exported-program reader (qfx::fx::load_exported_program):
// the archive's records, its JSON program, weights and constants, the modules it
// rebuilds, then one forward of the graph (pt2_harness.h). The input is a list of
// records rather than zip bytes, so mutations reach the program instead of the
// zip's checksums.
#include <cstdint>

#include "fuzz_util.h"
#include "pt2_harness.h"
#include "qfx/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qfx::fuzz::write_input(nullptr, 0, "model.pt2");
  try {
    qfx::fuzz::write_pt2(path, qfx::fuzz::pt2_records(data, size));
  } catch (const c10::Error&) {  // a record name the zip writer refuses: not an archive at all
    return 0;
  }
  try {
    qfx::fuzz::load_and_run_pt2(path);
  } catch (const qfx::Error& e) {
    qfx::fuzz::verbose(e);
  }
  return 0;
}
