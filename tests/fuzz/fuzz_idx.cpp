// libFuzzer target: the IDX reader behind `data: {format: idx}` (gzip or plain),
// through open_dataset and one batch, as calibration reads it.
#include <cstdint>

#include "fuzz_util.h"
#include "qfx/error.h"
#include "qfx/quant/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qfx::fuzz::write_input(data, size, "images.idx");
  try {
    qfx::quant::DataSpec spec;
    spec.format = "idx";
    spec.images = path;
    auto ds = qfx::quant::open_dataset(spec, {-1, 1, -1, -1}, 4, 0);
    if (ds->size() > 0) ds->batch(0, ds->size());
  } catch (const qfx::Error&) {
  }
  return 0;
}
