// qfx qat: parse the config, draw progress, print quant::qat's result.
#include "qat.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common.h"
#include "qfx/quant/distributed.h"
#include "qfx/quant/pipeline.h"

namespace qfx::cli {

int run_qat(const std::string& config_path, const std::vector<std::string>& overrides) {
  quant::JobConfig cfg = quant::load_job_config(config_path, overrides);
  ProgressHooks ph;
  auto dist = quant::distributed::init_from_env();
  const quant::QatResult r =
      run_rank(dist->world_size(), [&] { return quant::qat(cfg, dist->rank() == 0 ? ph.hooks() : quant::PipelineHooks{}, dist.get()); });
  if (r.rank != 0) return 0;  // rank 0 reports and writes the outputs
  std::printf("trained %lld steps (%.1f ms/step)\n", static_cast<long long>(r.steps), r.ms_per_step);
  std::printf("forward + backward of one batch: %.1f ms with fake quant, %.1f ms float (x%.2f)\n", r.fwd_bwd_ms_fake_quant,
              r.fwd_bwd_ms_float, r.fwd_bwd_ms_fake_quant / std::max(r.fwd_bwd_ms_float, 1e-9));
  std::printf("top-1 on %lld images: fp32 %.2f%%, QAT fake-quant %.2f%%, int8 (runtime) %.2f%% (%+.2f points vs fp32); "
              "int8 agrees with fake-quant on %.2f%%\n",
              static_cast<long long>(r.eval_images), 100 * r.top1_fp32, 100 * r.top1_fakequant, 100 * r.top1_int8,
              100 * (r.top1_int8 - r.top1_fp32), 100 * r.int8_agrees_with_fakequant);
  if (r.reference_images > 0)
    std::printf("reference backend: %lld of %lld int8 outputs identical to %s's\n", static_cast<long long>(r.reference_identical),
                static_cast<long long>(r.reference_images), r.runtime_backend.c_str());
  print_kernel_summary(r.kernel_report, r.runtime_backend);
  std::string files;
  for (const auto& o : r.outputs) files += (files.empty() ? "" : ", ") + std::filesystem::path(o).filename().string();
  std::printf("wrote %s in %s; checkpoint %s (%.1f s)\n", files.c_str(), r.output_dir.c_str(), r.checkpoint.c_str(), r.seconds);
  if (r.reference_identical != r.reference_images && !r.reference_exact_expected)
    std::printf("  (reference check: the model computes in float32 (%s), whose sums round differently on each backend; "
                "bit-identity is required of all-int8 models only)\n", r.reference_float_ops.c_str());
  if (r.reference_identical != r.reference_images && r.reference_exact_expected) {
    std::fprintf(stderr, "qfx: error: %lld of %lld int8 outputs differ from the reference backend's\n",
                 static_cast<long long>(r.reference_images - r.reference_identical), static_cast<long long>(r.reference_images));
    return 9;
  }
  return 0;
}

}  // namespace qfx::cli
