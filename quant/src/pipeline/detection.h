// Internal: evaluation.metric detection. A detector split by split_host_postprocess
// deploys its network; its post-processing (decoding, thresholds, NMS) stays on the
// host. The metric runs that host part on the fp32 and on the int8 network outputs and
// compares the boxes each finds.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/pipeline.h"

namespace qfx::quant::pipeline {

/// A traced model's post-processing as split_host_postprocess left it to the host.
struct HostPost {
  std::shared_ptr<fx::GraphModule> traced;  ///< the traced model before the split (host nodes included)
  HostSplit split;                          ///< which nodes are the host's, which values it reads
};

/// Runs the host part of `post.traced` on `inputs` (the model's inputs, one per
/// placeholder) with `device` (the deployed model's outputs, in HostSplit::outputs
/// order) in place of the network, whose nodes are not run. Returns the model's output.
/// Throws DataError when `device` does not hold one tensor per split output.
c10::IValue run_host_postprocess(const HostPost& post, const std::vector<at::Tensor>& inputs,
                                 const std::vector<at::Tensor>& device);

/// One image's detections: boxes [k, 4] (x0, y0, x1, y1), scores [k], labels [k]
/// (int64; all -1 when the post-processing gives none). Float64 on the CPU.
struct ImageDetections {
  at::Tensor boxes, scores, labels;
};

/// The detections of a post-processing output, one entry per image, from (also as the
/// first element of a tuple): a list of tensors [k, >= 5] (x0, y0, x1, y1, score[,
/// label]), a list of dictionaries with "boxes" [k, 4], "scores" [k] and optionally
/// "labels" [k] (torchvision's detection models), or one tensor [N, k, >= 5]. Throws
/// DataError naming `what` for anything else.
std::vector<ImageDetections> read_detections(const c10::IValue& out, const std::string& what);

/// Matches the detections of one image: fp32's boxes in descending score, each to the
/// unmatched int8 box of the same label with the highest IoU, if at least `min_iou`
/// (greedy, as COCO's evaluation matches detections to ground truth). Adds the image
/// to `E`'s detection counts and sums (finish_detection_metric makes the averages).
void match_detections(const ImageDetections& fp32, const ImageDetections& int8, double min_iou, PtqEvaluation* E);

/// Turns the sums match_detections accumulated into recall, precision and means.
void finish_detection_metric(PtqEvaluation* E);

}  // namespace qfx::quant::pipeline
