// The `calibration:` section: the samples calibration observes, and where.
#include "qfx/quant/torch_device.h"
#include "qfx/runtime/cuda.h"
#include "sections.h"

namespace qfx::quant::sections {

using namespace yaml;

const KeyTable& calibration_keys() {
  static const KeyTable t{"calibration", {
      {"data", KeyType::kData, {}, {}, "required", "the calibration samples (labels only for ptq.auto_fallback)", &data_source_keys()},
      {"num_samples", KeyType::kInt, {}, at_least(1), "512", "samples observed"},
      {"batch_size", KeyType::kInt, {}, at_least(1), "64", "samples per batch"},
      {"seed", KeyType::kInt, {}, {-1, kNoBound, false, false, "must be >= 0, or -1 for the first num_samples"}, "0",
       "the seeded draw of num_samples; -1: the first ones"},
      {"device", KeyType::kChoice, {"cpu", "cuda"}, saying("must be cpu or cuda"), "cpu",
       "where the float passes run and histogram observers count"},
  }};
  return t;
}

void read_calibration(const SectionReader& s, JobConfig* c) {
  CalibrationConfig& cal = c->calibration;
  read_samples(s, *c, &cal.enabled, &cal.data, &cal.num_samples, &cal.batch_size);
  s.read("device", &cal.device);
  if (cal.device == "cuda") {  // qfx's histogram kernel and libtorch's CUDA kernels
    std::string why = runtime::cuda_unavailable_reason();
    if (why.empty()) why = torch_device_unavailable_reason(c10::Device(c10::kCUDA));
    if (!why.empty()) bad(s.path(), s["device"], "calibration.device: cuda, but " + why);
  }
  s.read("seed", &cal.seed);
}

}  // namespace qfx::quant::sections
