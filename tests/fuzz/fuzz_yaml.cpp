// libFuzzer target: the YAML loaders of `qfx ptq` (the job config) and of
// backend files (BackendConfig::load), on the same bytes; a job config that loads
// has its qconfig mapping resolved against module paths, so patterns from the
// file (module_name_regex, RE2) are compiled and matched, long paths included.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "qfx/error.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/job_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qfx::fuzz::write_input(data, size, "config.yaml");
  try {
    const auto cfg = qfx::quant::load_job_config(path);
    static const std::vector<std::string> paths = {
        "", "layer1.0.conv1", "features.3.block.0", "head", "a.b.c",
        std::string(4096, 'a') + "b", std::string(2000, 'a') + "." + std::string(2000, 'b')};
    for (const auto& p : paths) cfg.qconfig.resolve(p, "Conv2d");
    cfg.qconfig.unmatched(paths);
  } catch (const qfx::Error&) {
  }
  try {
    qfx::quant::BackendConfig::load(path);
  } catch (const qfx::Error&) {
  }
  return 0;
}
