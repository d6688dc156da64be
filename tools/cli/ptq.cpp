// qfx ptq: parse the config, draw progress, print quant::ptq's result.
#include "ptq.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "common.h"
#include "qfx/quant/distributed.h"
#include "qfx/quant/evaluation_view.h"
#include "qfx/quant/pipeline.h"

namespace qfx::cli {
namespace {

// One dB cell of the per-layer table: the value, `missing` where not measured,
// "none" for no error at all.
std::string db_cell(bool has, double db, const char* missing = "-") {
  if (!has) return missing;
  if (!std::isfinite(db)) return "none";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f dB", db);
  return b;
}

}  // namespace

int run_ptq(const std::string& config_path, const std::vector<std::string>& overrides) {
  quant::JobConfig cfg = quant::load_job_config(config_path, overrides);
  ProgressHooks ph;
  auto dist = quant::distributed::init_from_env();
  const quant::PtqResult r =
      run_rank(dist->world_size(), [&] { return quant::ptq(cfg, dist->rank() == 0 ? ph.hooks() : quant::PipelineHooks{}, dist.get()); });
  if (r.rank != 0) return 0;  // rank 0 reports and writes the outputs
  std::printf("calibration: %lld images on %s (%d thread%s), %.1f images/s\n", static_cast<long long>(r.calibration.images),
              r.calibration.engine.c_str(), r.calibration.threads, r.calibration.threads == 1 ? "" : "s",
              r.calibration_images_per_s);
  if (!r.calibration.fallback_reason.empty()) std::printf("  (libtorch fallback: %s)\n", r.calibration.fallback_reason.c_str());
  if (r.evaluated) {
    const quant::PtqEvaluation& e = r.evaluation;
    const nlohmann::json view = quant::evaluation_view(e, r.runtime_backend);
    for (const auto& line : quant::render_console(quant::evaluation_console_lines(), view)) std::printf("%s\n", line.c_str());
    if (e.sqnr_images > 0) {
      std::printf("per-layer SQNR vs fp32 on %lld images, worst first (%zu layers; all in report.json):\n",
                  static_cast<long long>(e.sqnr_images), e.layers.size());
      std::printf("  %-40s %12s %12s %12s %12s\n", "quantized tensor (node)", "fake-quant", "int8", "own", "inherited");
      for (size_t k = 0; k < std::min<size_t>(e.layers.size(), 10); ++k) {
        const quant::LayerSqnr& l = e.layers[k];
        std::printf("  %-40s %12s %12s %12s %12s\n", l.node.c_str(), db_cell(true, l.sqnr_db_fakequant).c_str(),
                    db_cell(l.has_int8, l.sqnr_db_int8, "(float)").c_str(), db_cell(l.has_own, l.sqnr_db_own).c_str(),
                    db_cell(l.has_own, l.sqnr_db_inherited).c_str());
      }
      std::printf("  (own: the layer fed the fp32 model's values; inherited: what its quantized inputs add)\n");
    }
    if (!e.arithmetic_layers.empty()) {
      int64_t codes = 0, differing = 0;
      for (const auto& l : e.arithmetic_layers) {
        codes += l.codes;
        differing += l.differing;
      }
      std::printf("target arithmetic vs float requantization: %.3f%% of int8 codes differ (%zu layers)",
                  100.0 * static_cast<double>(differing) / static_cast<double>(std::max<int64_t>(codes, 1)),
                  e.arithmetic_layers.size());
      if (e.has_top1_float_requant) std::printf("; top-1 with float requantization %.2f%%", 100 * e.top1_float_requant);
      std::printf("\n");
      for (size_t k = 0; k < std::min<size_t>(e.arithmetic_layers.size(), 5); ++k) {
        const auto& l = e.arithmetic_layers[k];
        std::printf("  %-40s %8.3f%% of codes, max |diff| %d\n", l.node.c_str(),
                    100.0 * static_cast<double>(l.differing) / static_cast<double>(std::max<int64_t>(l.codes, 1)), l.max_abs_diff);
      }
    }
    for (const auto& line : quant::render_console(quant::evaluation_console_check_lines(), view)) std::printf("%s\n", line.c_str());
  }
  print_kernel_summary(r.kernel_report, r.runtime_backend);
  std::printf("float fallbacks: %s\n", r.float_fallbacks.empty() && r.runtime_float_groups.empty() ? "none" : "");
  for (const auto& f : r.float_fallbacks) std::printf("  %s\n", f.c_str());
  for (const auto& f : r.runtime_float_groups) std::printf("  runtime: %s\n", f.c_str());
  if (!r.host_postprocess.empty()) {
    std::string outs;
    for (const auto& o : r.host_postprocess.outputs) outs += (outs.empty() ? "" : ", ") + o;
    std::printf("host post-processing (float, on the host; not in model_int8.onnx, whose outputs %s it reads):\n", outs.c_str());
    for (const auto& h : r.host_postprocess.host_nodes) std::printf("  %s\n", h.c_str());
  }
  std::string files;
  for (const auto& o : r.outputs) files += (files.empty() ? "" : ", ") + std::filesystem::path(o).filename().string();
  std::printf("wrote %s in %s (%.1f s)\n", files.c_str(), r.output_dir.c_str(), r.seconds);
  // The int8 model must equal the reference arithmetic: a mismatch is a failure.
  if (r.evaluated && r.evaluation.reference_identical != r.evaluation.reference_images && !r.evaluation.reference_exact_expected)
    std::printf("  (reference check: the model computes in float32 (%s), whose sums round differently on each backend; "
                "bit-identity is required of all-int8 models only)\n", r.evaluation.reference_float_ops.c_str());
  if (r.evaluated && r.evaluation.reference_identical != r.evaluation.reference_images && r.evaluation.reference_exact_expected) {
    std::fprintf(stderr, "qfx: error: %lld of %lld int8 outputs differ from the reference backend's\n",
                 static_cast<long long>(r.evaluation.reference_images - r.evaluation.reference_identical),
                 static_cast<long long>(r.evaluation.reference_images));
    return 9;
  }
  return 0;
}

}  // namespace qfx::cli
