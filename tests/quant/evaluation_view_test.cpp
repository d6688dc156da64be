// The evaluation result's one description: report.json's object, the console
// lines and the page's values, against text written out by hand.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>

#include "qfx/quant/evaluation_view.h"

using namespace qfx::quant;
using nlohmann::json;

namespace {

PtqEvaluation top1_run() {
  PtqEvaluation E;
  E.images = 300;
  E.batch_size = 64;
  E.metric = "top1";
  E.fp32_runtime_vs_libtorch_max_rel_error = 3.25e-7;
  E.cosine_int8_vs_fp32 = 0.9987654;
  E.sqnr_db_int8_vs_fp32 = 27.34;
  E.outputs = {{"output", 0.9987654, 27.34}};
  E.fp32_ms_per_image = 0.5;
  E.int8_ms_per_image = 0.25;
  E.has_top1 = true;
  E.top1_fp32 = 0.9;
  E.top1_int8 = 0.8966666666666666;
  E.prediction_agreement = 0.99;
  E.reference_images = 100;
  E.reference_identical = 100;
  E.reference_max_abs_diff = 0;
  E.reference_exact_expected = true;
  return E;
}

std::set<std::string> keys(const json& j) {
  std::set<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.insert(it.key());
  return k;
}

}  // namespace

TEST(EvaluationView, ConsoleLinesReadAsQfxPtqPrintsThem) {
  const json view = evaluation_view(top1_run(), "onednn");
  const std::vector<std::string> expected = {
      "fp32 on the runtime vs libtorch (first batch): max relative error 3.25e-07",
      "latency on the runtime (batch 64): fp32 0.500 ms/image, int8 0.250 ms/image (int8/fp32 0.50)",
      "output: cosine int8 vs fp32 0.99877, SQNR 27.3 dB",
      "top-1: fp32 90.00%, int8 89.67% (-0.33 points); int8 and fp32 agree on 99.00% of 300 images",
  };
  EXPECT_EQ(render_console(evaluation_console_lines(), view), expected);
  EXPECT_EQ(render_console(evaluation_console_check_lines(), view),
            std::vector<std::string>{"reference backend: 100 of 100 int8 outputs identical to onednn's (max |diff| 0)"});
}

TEST(EvaluationView, SeveralOutputsDetectionAndSegmentationLines) {
  PtqEvaluation E = top1_run();
  E.has_top1 = false;
  E.outputs = {{"boxes", 0.5, 3.0}, {"scores", 1.0, 40.25}};
  E.has_miou = E.has_miou_labels = true;
  E.miou_int8_vs_fp32 = 0.75;
  E.miou_classes = 21;
  E.pixel_agreement = 0.955;
  E.miou_fp32_vs_labels = 0.5;
  E.miou_int8_vs_labels = 0.25;
  E.miou_label_classes = 20;
  E.labelled_pixels = 4096;
  E.has_detection = true;
  E.detection_images = 8;
  E.detection_min_iou = 0.5;
  E.detection_fp32_boxes = 40;
  E.detection_int8_boxes = 38;
  E.detection_matched = 36;
  E.detection_recall = 0.9;
  E.detection_precision = 36.0 / 38;
  E.detection_mean_iou = 0.875;
  E.detection_score_mean_abs_diff = 0.0125;
  E.detection_score_max_abs_diff = 0.25;
  const auto lines = render_console(evaluation_console_lines(), evaluation_view(E, "onednn"));
  ASSERT_EQ(lines.size(), 8u);
  EXPECT_EQ(lines[3], "  output 'boxes': cosine 0.50000, SQNR 3.0 dB");
  EXPECT_EQ(lines[4], "  output 'scores': cosine 1.00000, SQNR 40.2 dB");
  EXPECT_EQ(lines[5], "segmentation: mean IoU of int8 against fp32 0.7500 over 21 classes; 95.50% of pixels agree");
  EXPECT_EQ(lines[6], "segmentation against the labels: mean IoU fp32 0.5000, int8 0.2500 (-0.2500) over 20 classes, 4096 labelled pixels");
  EXPECT_EQ(lines[7],
            "detection (host post-processing on each model's outputs, 8 images): int8 finds 90.00% of fp32's 40 boxes (IoU >= "
            "0.50, same label), 94.74% of its 38 boxes match; matched IoU 0.8750, score difference mean 0.0125, max 0.2500");
}

// report.json's "evaluation": the keys qfx has always written, nested where they nest,
// and nothing derived.
TEST(EvaluationView, ReportJsonKeys) {
  const json j = evaluation_report_json(evaluation_view(top1_run(), "onednn"));
  EXPECT_EQ(keys(j), (std::set<std::string>{"images", "batch_size", "metric", "fp32_runtime_vs_libtorch_max_rel_error",
                                            "cosine_int8_vs_fp32", "sqnr_db_int8_vs_fp32", "outputs", "fp32_output_constant",
                                            "fp32_ms_per_image", "int8_ms_per_image", "top1_fp32", "top1_int8",
                                            "prediction_agreement", "reference_check"}));
  EXPECT_EQ(keys(j["reference_check"]), (std::set<std::string>{"images", "identical_outputs", "max_abs_diff", "exact_expected", "float_ops"}));
  EXPECT_EQ(j["outputs"], json::parse(R"([{"name": "output", "cosine_int8_vs_fp32": 0.9987654, "sqnr_db_int8_vs_fp32": 27.34}])"));
  EXPECT_EQ(j["images"], 300);
  EXPECT_EQ(j["top1_int8"], 0.8966666666666666);
}

// The page reads the same description back from report.json.
TEST(EvaluationView, PageValuesFromReportJson) {
  json report = {{"runtime_backend", "onednn"}};
  report["evaluation"] = evaluation_report_json(evaluation_view(top1_run(), "onednn"));
  const json view = evaluation_view_from_report(report);
  EXPECT_EQ(page_value(view, "top1_fp32"), "90 %");
  EXPECT_EQ(page_value(view, "cosine_int8_vs_fp32"), "0.998765");
  EXPECT_EQ(page_value(view, "sqnr_db_int8_vs_fp32"), "27.34 dB");
  EXPECT_EQ(page_value(view, "top1_fakequant"), "-");
  std::vector<std::string> rows;
  for (const auto& l : evaluation_page_rows()) rows.push_back(l.label + ": " + render_page_text(l, view));
  EXPECT_EQ(rows, (std::vector<std::string>{"latency fp32 / int8: 0.5 / 0.25 ms per image (runtime)", "int8 and fp32 agree: 99 %",
                                            "reference backend: 100 of 100 outputs bit-identical"}));
  EXPECT_EQ(render_console(evaluation_console_lines(), view), render_console(evaluation_console_lines(), evaluation_view(top1_run(), "onednn")));
  // A report.json of another shape draws what it can, never throws.
  const json odd = evaluation_view_from_report(json::parse(R"({"evaluation": {"top1_fp32": "high", "reference_check": 3}})"));
  EXPECT_FALSE(odd.contains("top1_fp32"));
  EXPECT_EQ(page_value(odd, "top1_fp32"), "-");
  EXPECT_NO_THROW(evaluation_view_from_report(json::array()));
}
