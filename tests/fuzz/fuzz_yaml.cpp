// libFuzzer target: the YAML loaders of `qfx ptq` (the job config) and of
// backend files (BackendConfig::load), on the same bytes.
#include <cstdint>

#include "fuzz_util.h"
#include "qfx/error.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/job_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qfx::fuzz::write_input(data, size, "config.yaml");
  try {
    qfx::quant::load_job_config(path);
  } catch (const qfx::Error&) {
  }
  try {
    qfx::quant::BackendConfig::load(path);
  } catch (const qfx::Error&) {
  }
  return 0;
}
