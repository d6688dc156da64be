// libFuzzer target: the image decoder of `data: {format: images}` (PNG through
// libpng, JPEG through libjpeg-turbo, chosen by the file's signature), then
// the dataset's resize and crop on one decoded image.
#include <cstdint>
#include <filesystem>

#include "fuzz_util.h"
#include "qfx/error.h"
#include "qfx/quant/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qfx::fuzz::write_input(data, size, "images/c0/img.png");
  try {
    at::Tensor img = qfx::quant::decode_image(path);
    if (img.numel() > 0 && img.numel() < (1 << 22)) {
      qfx::quant::DataSpec spec;
      spec.format = "images";
      spec.images = std::filesystem::path(path).parent_path().parent_path().string();
      spec.labels = "subfolders";
      spec.resize = 8;
      spec.crop = 6;
      spec.mean = {0.5};
      spec.std = {0.25};
      auto ds = qfx::quant::open_dataset(spec, {-1, 3, 6, 6}, 1, -1);
      ds->batch(0, 1);
    }
  } catch (const qfx::Error&) {
  }
  return 0;
}
