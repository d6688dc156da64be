// The AIMET output: the staged int8 ONNX written again as AIMET's float model and
// encodings.
#include "qfx/runtime/aimet.h"
#include "stages.h"

namespace qfx::quant::pipeline {

void write_aimet_output(const Job& job, const std::string& onnx_path, const Staging& out) {
  if (!job.cfg.output.aimet) return;
  runtime::AimetOptions options;
  options.version = job.cfg.output.aimet_encoding_version;
  options.what = "model_int8.onnx";
  const runtime::AimetSummary sum =
      runtime::write_aimet(onnx_path, out.path("model_aimet.onnx"), out.path("model_aimet.encodings"), options);
  info(job.hooks, "model_aimet.onnx + model_aimet.encodings (AIMET " + options.version + "): " + std::to_string(sum.activations) +
                      " activation and " + std::to_string(sum.params) + " weight encodings");
}

}  // namespace qfx::quant::pipeline
