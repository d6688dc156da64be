// evaluation.metric detection's reading and matching of boxes, against counts and
// IoUs worked out by hand for the boxes below.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "../../quant/src/pipeline/detection.h"
#include "qfx/error.h"

using namespace qfx::quant;
using namespace qfx::quant::pipeline;

namespace {

// Rows x0, y0, x1, y1, score[, label].
at::Tensor rows(std::vector<std::vector<double>> r) {
  const int64_t cols = static_cast<int64_t>(r.front().size());
  at::Tensor t = at::empty({static_cast<int64_t>(r.size()), cols}, at::kFloat);
  for (size_t i = 0; i < r.size(); ++i)
    for (int64_t j = 0; j < cols; ++j) t[static_cast<int64_t>(i)][j] = r[i][static_cast<size_t>(j)];
  return t;
}

}  // namespace

TEST(DetectionMetric, MatchesGreedilyByScoreWithinLabels) {
  // fp32: A [0,0,10,10] 0.9 label 1; B [20,20,30,30] 0.8 label 1; C [0,0,10,10] 0.7 label 2.
  // int8: a [0,0,10,5] 0.85 label 1 (IoU with A: 50/100 = 0.5), b [21,20,31,30] 0.6 label 1
  // (IoU with B: 90/110), c [0,0,10,10] 0.75 label 3 (C's box, another label).
  const auto f = read_detections(c10::IValue(c10::List<at::Tensor>({rows(
                                     {{0, 0, 10, 10, 0.9, 1}, {20, 20, 30, 30, 0.8, 1}, {0, 0, 10, 10, 0.7, 2}})})),
                                 "fp32");
  const auto q = read_detections(c10::IValue(c10::List<at::Tensor>({rows(
                                     {{0, 0, 10, 5, 0.85, 1}, {21, 20, 31, 30, 0.6, 1}, {0, 0, 10, 10, 0.75, 3}})})),
                                 "int8");
  ASSERT_EQ(f.size(), 1u);
  PtqEvaluation E;
  match_detections(f[0], q[0], 0.5, &E);
  finish_detection_metric(&E);
  EXPECT_EQ(E.detection_images, 1);
  EXPECT_EQ(E.detection_fp32_boxes, 3);
  EXPECT_EQ(E.detection_int8_boxes, 3);
  EXPECT_EQ(E.detection_matched, 2);  // A-a, B-b; C's label has no int8 box
  EXPECT_NEAR(E.detection_recall, 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(E.detection_mean_iou, (0.5 + 90.0 / 110.0) / 2, 1e-6);
  EXPECT_NEAR(E.detection_score_mean_abs_diff, (0.05 + 0.2) / 2, 1e-6);
  EXPECT_NEAR(E.detection_score_max_abs_diff, 0.2, 1e-6);
  // Above the pair's IoU nothing matches A-a.
  PtqEvaluation strict;
  match_detections(f[0], q[0], 0.6, &strict);
  EXPECT_EQ(strict.detection_matched, 1);
}

TEST(DetectionMetric, TheHigherScoredBoxChoosesFirst) {
  // Both fp32 boxes overlap the one int8 box; the higher-scored one takes it.
  const auto f = read_detections(at::stack({rows({{0, 0, 10, 10, 0.3}, {0, 0, 10, 9, 0.9}})}), "fp32");
  const auto q = read_detections(at::stack({rows({{0, 0, 10, 10, 0.5}})}), "int8");
  PtqEvaluation E;
  match_detections(f[0], q[0], 0.5, &E);
  finish_detection_metric(&E);
  EXPECT_EQ(E.detection_matched, 1);
  EXPECT_NEAR(E.detection_mean_iou, 0.9, 1e-6);  // the 0.9-scored box [0,0,10,9]
  EXPECT_NEAR(E.detection_score_mean_abs_diff, 0.4, 1e-6);
}

TEST(DetectionMetric, ReadsTorchvisionDictionariesAndRefusesOtherOutputs) {
  c10::impl::GenericDict d(c10::StringType::get(), c10::TensorType::get());
  d.insert("boxes", rows({{1, 2, 3, 4}, {5, 6, 7, 8}}));
  d.insert("scores", at::tensor({0.5, 0.25}));
  d.insert("labels", at::tensor({int64_t{7}, int64_t{9}}));
  c10::impl::GenericList l(c10::DictType::create(c10::StringType::get(), c10::TensorType::get()));
  l.push_back(d);
  const auto got = read_detections(c10::IValue(l), "dicts");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].boxes.size(0), 2);
  EXPECT_EQ(got[0].labels[1].item<int64_t>(), 9);
  EXPECT_DOUBLE_EQ(got[0].scores[0].item<double>(), 0.5);
  EXPECT_THROW(read_detections(c10::IValue(at::zeros({2, 4})), "a 2-D tensor"), qfx::DataError);
  EXPECT_THROW(read_detections(c10::IValue(c10::List<at::Tensor>({at::zeros({3, 4})})), "four columns"), qfx::DataError);
  EXPECT_THROW(read_detections(c10::IValue(int64_t{3}), "an int"), qfx::DataError);
}

TEST(DetectionMetric, NoBoxesOnEitherSide) {
  const auto none = read_detections(c10::IValue(c10::List<at::Tensor>({at::zeros({0, 5})})), "none");
  const auto one = read_detections(c10::IValue(c10::List<at::Tensor>({rows({{0, 0, 1, 1, 0.5}})})), "one");
  PtqEvaluation E;
  match_detections(none[0], one[0], 0.5, &E);
  finish_detection_metric(&E);
  EXPECT_EQ(E.detection_matched, 0);
  EXPECT_DOUBLE_EQ(E.detection_recall, 1.0);  // fp32 found nothing: nothing missed
  EXPECT_DOUBLE_EQ(E.detection_precision, 0.0);
}
