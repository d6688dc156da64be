// The evaluation result's description: its fields and the console's and page's
// lines, the one table report.json, `qfx ptq` and report.html read.
#include "qfx/quant/evaluation_view.h"

#include <algorithm>

namespace qfx::quant {

namespace {

using nlohmann::json;
using U = ResultUnit;

// A field read from a PTQ run.
template <typename F>
EvaluationField field(std::string key, std::string label, U unit, std::string console, int digits, F&& get, bool card = false) {
  EvaluationField f{std::move(key), std::move(label), unit, std::move(console), digits, std::forward<F>(get), nullptr, card};
  return f;
}

// A field computed from the view's other fields.
template <typename F>
EvaluationField derived(std::string key, std::string label, U unit, std::string console, F&& derive) {
  return {std::move(key), std::move(label), unit, std::move(console), 4, nullptr, std::forward<F>(derive), false};
}

// A field of a list's items, or one only other pipelines write (QAT).
EvaluationField plain(std::string key, std::string label, U unit, std::string console, int digits = 4, bool card = false) {
  return {std::move(key), std::move(label), unit, std::move(console), digits, nullptr, nullptr, card};
}

// `E.x` when `on`, null otherwise.
json when(bool on, json v) { return on ? std::move(v) : json(); }

json outputs_list(const PtqEvaluation& E) {
  json a = json::array();
  for (const auto& o : E.outputs) a.push_back({{"name", o.name}, {"cosine_int8_vs_fp32", o.cosine}, {"sqnr_db_int8_vs_fp32", o.sqnr_db}});
  return a;
}

// `view[b] - view[a]` when both are numbers.
json difference(const json& view, const char* a, const char* b) {
  if (!view.contains(a) || !view.contains(b) || !view[a].is_number() || !view[b].is_number()) return json();
  return view[b].get<double>() - view[a].get<double>();
}

std::vector<EvaluationField> metric_fields() {
  return {
      field("images", "evaluation images", U::kCount, "%lld", 0, [](const PtqEvaluation& E) { return json(E.images); }),
      field("batch_size", "evaluation batch", U::kCount, "%lld", 0, [](const PtqEvaluation& E) { return json(E.batch_size); }),
      field("metric", "metric", U::kText, "%s", 0, [](const PtqEvaluation& E) { return json(E.metric); }),
      field("fp32_runtime_vs_libtorch_max_rel_error", "fp32 runtime vs libtorch, max relative error", U::kNumber, "%.2e", 4,
            [](const PtqEvaluation& E) { return json(E.fp32_runtime_vs_libtorch_max_rel_error); }),
      field("top1_fp32", "top-1 fp32", U::kFraction, "%.2f", 4, [](const PtqEvaluation& E) { return when(E.has_top1, E.top1_fp32); }, true),
      field("top1_int8", "top-1 int8", U::kFraction, "%.2f", 4, [](const PtqEvaluation& E) { return when(E.has_top1, E.top1_int8); }, true),
      plain("top1_fakequant", "top-1 fake-quant", U::kFraction, "%.2f", 4, true),
      plain("int8_agrees_with_fakequant", "int8 and fake-quant agree", U::kFraction, "%.2f"),
      field("cosine_int8_vs_fp32", "cosine int8 vs fp32", U::kNumber, "%.5f", 6,
            [](const PtqEvaluation& E) { return json(E.cosine_int8_vs_fp32); }, true),
      field("sqnr_db_int8_vs_fp32", "output SQNR", U::kDb, "%.1f", 4, [](const PtqEvaluation& E) { return json(E.sqnr_db_int8_vs_fp32); },
            true),
      field("outputs", "outputs", U::kList, "", 0, outputs_list),
      plain("outputs.name", "output", U::kText, "%s"),
      plain("outputs.cosine_int8_vs_fp32", "cosine int8 vs fp32", U::kNumber, "%.5f", 6),
      plain("outputs.sqnr_db_int8_vs_fp32", "SQNR int8 vs fp32", U::kDb, "%.1f"),
      field("fp32_output_constant", "fp32 output constant", U::kFlag, "%s", 0, [](const PtqEvaluation& E) { return json(E.fp32_output_constant); }),
      field("fp32_ms_per_image", "latency fp32", U::kMs, "%.3f", 4, [](const PtqEvaluation& E) { return json(E.fp32_ms_per_image); }),
      field("int8_ms_per_image", "latency int8", U::kMs, "%.3f", 4, [](const PtqEvaluation& E) { return json(E.int8_ms_per_image); }),
      field("prediction_agreement", "int8 and fp32 agree", U::kFraction, "%.2f", 4,
            [](const PtqEvaluation& E) { return when(E.has_top1, E.prediction_agreement); }),
      derived("latency_ratio", "latency int8 / fp32", U::kNumber, "%.2f", [](const json& v) {
        if (!v.contains("fp32_ms_per_image") || !v.contains("int8_ms_per_image")) return json();
        return json(v["int8_ms_per_image"].get<double>() / std::max(v["fp32_ms_per_image"].get<double>(), 1e-12));
      }),
      derived("top1_change", "top-1 int8 - fp32", U::kFraction, "%+.2f", [](const json& v) { return difference(v, "top1_fp32", "top1_int8"); }),
  };
}

std::vector<EvaluationField> segmentation_fields() {
  return {
      field("miou_int8_vs_fp32", "mean IoU int8 vs fp32", U::kNumber, "%.4f", 4,
            [](const PtqEvaluation& E) { return when(E.has_miou, E.miou_int8_vs_fp32); }),
      field("pixel_agreement", "pixels that agree", U::kFraction, "%.2f", 4, [](const PtqEvaluation& E) { return when(E.has_miou, E.pixel_agreement); }),
      field("miou_classes", "classes", U::kCount, "%lld", 0, [](const PtqEvaluation& E) { return when(E.has_miou, E.miou_classes); }),
      field("miou_fp32_vs_labels", "mean IoU fp32 vs labels", U::kNumber, "%.4f", 4,
            [](const PtqEvaluation& E) { return when(E.has_miou && E.has_miou_labels, E.miou_fp32_vs_labels); }),
      field("miou_int8_vs_labels", "mean IoU int8 vs labels", U::kNumber, "%.4f", 4,
            [](const PtqEvaluation& E) { return when(E.has_miou && E.has_miou_labels, E.miou_int8_vs_labels); }),
      field("miou_label_classes", "labelled classes", U::kCount, "%lld", 0,
            [](const PtqEvaluation& E) { return when(E.has_miou && E.has_miou_labels, E.miou_label_classes); }),
      field("labelled_pixels", "labelled pixels", U::kCount, "%lld", 0,
            [](const PtqEvaluation& E) { return when(E.has_miou && E.has_miou_labels, E.labelled_pixels); }),
      derived("miou_change_vs_labels", "mean IoU vs labels, int8 - fp32", U::kNumber, "%+.4f",
              [](const json& v) { return difference(v, "miou_fp32_vs_labels", "miou_int8_vs_labels"); }),
  };
}

std::vector<EvaluationField> detection_fields() {
  auto d = [](auto member) { return [member](const PtqEvaluation& E) { return when(E.has_detection, E.*member); }; };
  return {
      field("detection.images", "detection images", U::kCount, "%lld", 0, d(&PtqEvaluation::detection_images)),
      field("detection.min_iou", "box match IoU", U::kNumber, "%.2f", 4, d(&PtqEvaluation::detection_min_iou)),
      field("detection.fp32_boxes", "fp32 boxes", U::kCount, "%lld", 0, d(&PtqEvaluation::detection_fp32_boxes)),
      field("detection.int8_boxes", "int8 boxes", U::kCount, "%lld", 0, d(&PtqEvaluation::detection_int8_boxes)),
      field("detection.matched", "matched boxes", U::kCount, "%lld", 0, d(&PtqEvaluation::detection_matched)),
      field("detection.recall", "fp32 boxes int8 finds", U::kFraction, "%.2f", 4, d(&PtqEvaluation::detection_recall)),
      field("detection.precision", "int8 boxes that match", U::kFraction, "%.2f", 4, d(&PtqEvaluation::detection_precision)),
      field("detection.mean_iou", "matched IoU", U::kNumber, "%.4f", 4, d(&PtqEvaluation::detection_mean_iou)),
      field("detection.score_mean_abs_diff", "score difference, mean", U::kNumber, "%.4f", 4, d(&PtqEvaluation::detection_score_mean_abs_diff)),
      field("detection.score_max_abs_diff", "score difference, max", U::kNumber, "%.4f", 4, d(&PtqEvaluation::detection_score_max_abs_diff)),
  };
}

std::vector<EvaluationField> reference_fields() {
  auto r = [](auto member) { return [member](const PtqEvaluation& E) { return when(E.reference_images > 0, E.*member); }; };
  return {
      field("reference_check.images", "reference check images", U::kCount, "%lld", 0, r(&PtqEvaluation::reference_images)),
      field("reference_check.identical_outputs", "outputs identical to the reference backend's", U::kCount, "%lld", 0,
            r(&PtqEvaluation::reference_identical)),
      field("reference_check.max_abs_diff", "max |diff| against the reference backend", U::kNumber, "%.3g", 4,
            r(&PtqEvaluation::reference_max_abs_diff)),
      field("reference_check.exact_expected", "bit-identity expected", U::kFlag, "%s", 0, r(&PtqEvaluation::reference_exact_expected)),
      field("reference_check.float_ops", "ops computed in float32", U::kText, "%s", 0, r(&PtqEvaluation::reference_float_ops)),
      plain("runtime_backend", "runtime backend", U::kText, "%s"),
  };
}

}  // namespace

const std::vector<EvaluationField>& evaluation_fields() {
  static const std::vector<EvaluationField> all = [] {
    std::vector<EvaluationField> f;
    for (auto part : {metric_fields(), segmentation_fields(), detection_fields(), reference_fields()})
      f.insert(f.end(), part.begin(), part.end());
    return f;
  }();
  return all;
}

const std::vector<EvaluationLine>& evaluation_console_lines() {
  static const std::vector<EvaluationLine> lines = {
      {"fp32_runtime_vs_libtorch_max_rel_error", "",
       "fp32 on the runtime vs libtorch (first batch): max relative error {fp32_runtime_vs_libtorch_max_rel_error}"},
      {"fp32_ms_per_image", "",
       "latency on the runtime (batch {batch_size}): fp32 {fp32_ms_per_image} ms/image, int8 {int8_ms_per_image} ms/image "
       "(int8/fp32 {latency_ratio})"},
      {"cosine_int8_vs_fp32", "", "output: cosine int8 vs fp32 {cosine_int8_vs_fp32}, SQNR {sqnr_db_int8_vs_fp32} dB"},
      {"outputs", "", "  output '{name}': cosine {cosine_int8_vs_fp32}, SQNR {sqnr_db_int8_vs_fp32} dB", 2},
      {"top1_fp32", "",
       "top-1: fp32 {top1_fp32}%, int8 {top1_int8}% ({top1_change} points); int8 and fp32 agree on {prediction_agreement}% of "
       "{images} images"},
      {"miou_int8_vs_fp32", "",
       "segmentation: mean IoU of int8 against fp32 {miou_int8_vs_fp32} over {miou_classes} classes; {pixel_agreement}% of "
       "pixels agree"},
      {"miou_fp32_vs_labels", "",
       "segmentation against the labels: mean IoU fp32 {miou_fp32_vs_labels}, int8 {miou_int8_vs_labels} "
       "({miou_change_vs_labels}) over {miou_label_classes} classes, {labelled_pixels} labelled pixels"},
      {"detection.images", "",
       "detection (host post-processing on each model's outputs, {detection.images} images): int8 finds {detection.recall}% "
       "of fp32's {detection.fp32_boxes} boxes (IoU >= {detection.min_iou}, same label), {detection.precision}% of its "
       "{detection.int8_boxes} boxes match; matched IoU {detection.mean_iou}, score difference mean "
       "{detection.score_mean_abs_diff}, max {detection.score_max_abs_diff}"},
  };
  return lines;
}

const std::vector<EvaluationLine>& evaluation_console_check_lines() {
  static const std::vector<EvaluationLine> lines = {
      {"reference_check.images", "",
       "reference backend: {reference_check.identical_outputs} of {reference_check.images} int8 outputs identical to "
       "{runtime_backend}'s (max |diff| {reference_check.max_abs_diff})"},
  };
  return lines;
}

const std::vector<EvaluationLine>& evaluation_page_rows() {
  static const std::vector<EvaluationLine> rows = {
      {"fp32_ms_per_image", "latency fp32 / int8", "{fp32_ms_per_image} / {int8_ms_per_image} ms per image (runtime)"},
      {"prediction_agreement", "int8 and fp32 agree", "{prediction_agreement}"},
      {"reference_check.images", "reference backend", "{reference_check.identical_outputs} of {reference_check.images} outputs bit-identical"},
  };
  return rows;
}

}  // namespace qfx::quant
