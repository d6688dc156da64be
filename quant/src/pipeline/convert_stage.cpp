// Convert stage: convert_fx and the int8 ONNX export into the staging folder,
// parsed once and loaded on the job's runtime backend.
#include "stages.h"

namespace qfx::quant::pipeline {

template <typename Result>
Int8Model convert_stage(const Job& job, fx::GraphModule& gm, const Staging& out, Result* r) {
  const std::string path = out.path("model_int8.onnx");
  const bool nbits = job.cfg.output.block_weight_format == "matmul_nbits";
  const int level = static_cast<int>(job.cfg.output.matmul_nbits_accuracy_level);
  ExportResult exported = convert_model(gm, path, job.cfg.model.inputs, &r->converted, job.backend.arithmetic, nbits, level);
  if (nbits)
    info(job.hooks, exported.matmul_nbits ? std::to_string(exported.matmul_nbits) + " MatMuls written as com.microsoft MatMulNBits" +
                                                (level == 4 ? " (accuracy_level 4: int8 activations per block, W4A8)" : "")
                                          : "warning: output.block_weight_format: matmul_nbits, but no MatMul has block-wise "
                                            "4-bit weights (block_size a power of two >= 16)");
  write_tflite_output(job, path, out);
  write_aimet_output(job, path, out);
  runtime::ParsedModel parsed = runtime::Model::parse(path);
  runtime::Model model = runtime::Model::load(parsed, {job.runtime()});
  const std::string output = output_name(model, job.output, job.config());
  r->float_fallbacks = float_fallbacks(gm);
  r->runtime_float_groups = model.float_fallbacks();
  r->kernel_report = model.kernel_report();
  return {path, std::move(exported), std::move(parsed), std::move(model), output};
}

template Int8Model convert_stage<PtqResult>(const Job&, fx::GraphModule&, const Staging&, PtqResult*);
template Int8Model convert_stage<QatResult>(const Job&, fx::GraphModule&, const Staging&, QatResult*);

}  // namespace qfx::quant::pipeline
