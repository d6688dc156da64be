// qfx ptq: parse the config, draw progress, print quant::ptq's result.
#include "ptq.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common.h"
#include "qfx/quant/distributed.h"
#include "qfx/quant/pipeline.h"

namespace qfx::cli {

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
    std::printf("fp32 on the runtime vs libtorch (first batch): max relative error %.2e\n",
                e.fp32_runtime_vs_libtorch_max_rel_error);
    std::printf("latency on the runtime (batch %lld): fp32 %.3f ms/image, int8 %.3f ms/image (int8/fp32 %.2f)\n",
                static_cast<long long>(e.batch_size), e.fp32_ms_per_image, e.int8_ms_per_image,
                e.int8_ms_per_image / std::max(e.fp32_ms_per_image, 1e-12));
    std::printf("output: cosine int8 vs fp32 %.5f, SQNR %.1f dB\n", e.cosine_int8_vs_fp32, e.sqnr_db_int8_vs_fp32);
    if (e.outputs.size() > 1)
      for (const auto& o : e.outputs)
        std::printf("  output '%s': cosine %.5f, SQNR %.1f dB\n", o.name.c_str(), o.cosine, o.sqnr_db);
    if (e.has_top1)
      std::printf("top-1: fp32 %.2f%%, int8 %.2f%% (%+.2f points); int8 and fp32 agree on %.2f%% of %lld images\n",
                  100 * e.top1_fp32, 100 * e.top1_int8, 100 * (e.top1_int8 - e.top1_fp32), 100 * e.prediction_agreement,
                  static_cast<long long>(e.images));
    if (e.has_miou)
      std::printf("segmentation: mean IoU of int8 against fp32 %.4f over %lld classes; %.2f%% of pixels agree\n",
                  e.miou_int8_vs_fp32, static_cast<long long>(e.miou_classes), 100 * e.pixel_agreement);
    if (e.has_miou_labels)
      std::printf("segmentation against the labels: mean IoU fp32 %.4f, int8 %.4f (%+.4f) over %lld classes, %lld labelled pixels\n",
                  e.miou_fp32_vs_labels, e.miou_int8_vs_labels, e.miou_int8_vs_labels - e.miou_fp32_vs_labels,
                  static_cast<long long>(e.miou_label_classes), static_cast<long long>(e.labelled_pixels));
    if (e.has_detection)
      std::printf("detection (host post-processing on each model's outputs, %lld images): int8 finds %.2f%% of fp32's %lld "
                  "boxes (IoU >= %.2f, same label), %.2f%% of its %lld boxes match; matched IoU %.4f, score difference "
                  "mean %.4f, max %.4f\n",
                  static_cast<long long>(e.detection_images), 100 * e.detection_recall,
                  static_cast<long long>(e.detection_fp32_boxes), e.detection_min_iou, 100 * e.detection_precision,
                  static_cast<long long>(e.detection_int8_boxes), e.detection_mean_iou, e.detection_score_mean_abs_diff,
                  e.detection_score_max_abs_diff);
    if (e.sqnr_images > 0) {
      std::printf("per-layer SQNR vs fp32 on %lld images, worst first (%zu layers; all in report.json):\n",
                  static_cast<long long>(e.sqnr_images), e.layers.size());
      std::printf("  %-40s %12s %12s\n", "quantized tensor (node)", "fake-quant", "int8");
      for (size_t k = 0; k < std::min<size_t>(e.layers.size(), 10); ++k) {
        char q[32] = "    (float)";
        if (e.layers[k].has_int8) std::snprintf(q, sizeof q, "%9.1f dB", e.layers[k].sqnr_db_int8);
        std::printf("  %-40s %9.1f dB %12s\n", e.layers[k].node.c_str(), e.layers[k].sqnr_db_fakequant, q);
      }
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
    if (e.reference_images > 0)
      std::printf("reference backend: %lld of %lld int8 outputs identical to %s's (max |diff| %.3g)\n",
                  static_cast<long long>(e.reference_identical), static_cast<long long>(e.reference_images),
                  r.runtime_backend.c_str(), e.reference_max_abs_diff);
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
    std::printf("  (the model has float groups, listed above: float sums round differently on each backend, so "
                "bit-identity is required of all-int8 models only)\n");
  if (r.evaluated && r.evaluation.reference_identical != r.evaluation.reference_images && r.evaluation.reference_exact_expected) {
    std::fprintf(stderr, "qfx: error: %lld of %lld int8 outputs differ from the reference backend's\n",
                 static_cast<long long>(r.evaluation.reference_images - r.evaluation.reference_identical),
                 static_cast<long long>(r.evaluation.reference_images));
    return 9;
  }
  return 0;
}

}  // namespace qfx::cli
