// evaluation.metric detection (see detection.h): the host post-processing run on
// both models' network outputs, and box-level agreement.
#include "detection.h"

#include <ATen/ATen.h>

#include <set>
#include <unordered_map>
#include <unordered_set>

#include "qfx/error.h"
#include "qfx/fx/interpreter.h"

namespace qfx::quant::pipeline {
namespace {

// Runs only what the graph's output needs, with the split values given.
class HostRunner : public fx::Interpreter {
 public:
  HostRunner(fx::GraphModule& gm, std::unordered_map<std::string, at::Tensor> given)
      : fx::Interpreter(gm), given_(std::move(given)) {
    std::vector<const fx::Node*> todo;
    if (const fx::Node* out = gm.graph().output_node()) todo.push_back(out);
    while (!todo.empty()) {
      const fx::Node* n = todo.back();
      todo.pop_back();
      if (!needed_.insert(n).second || given_.count(n->name())) continue;
      for (const fx::Node* in : n->input_nodes()) todo.push_back(in);
    }
  }

 protected:
  c10::IValue run_node(const fx::Node* n) override {
    auto it = given_.find(n->name());
    if (it != given_.end()) return it->second;
    if (!needed_.count(n) && n->op() != fx::Opcode::kPlaceholder) return c10::IValue();
    return fx::Interpreter::run_node(n);
  }

 private:
  std::unordered_map<std::string, at::Tensor> given_;
  std::unordered_set<const fx::Node*> needed_;
};

ImageDetections from_rows(const at::Tensor& t, const std::string& what) {
  if (t.dim() != 2 || t.size(1) < 5)
    throw DataError(what + ": a detection tensor must be [boxes, >= 5] (x0, y0, x1, y1, score[, label]), got " +
                    c10::str(t.sizes()));
  const at::Tensor d = t.to(at::kDouble);
  return {d.slice(1, 0, 4), d.select(1, 4),
          t.size(1) > 5 ? d.select(1, 5).round().to(at::kLong) : at::full({t.size(0)}, -1, at::kLong)};
}

ImageDetections from_dict(const c10::impl::GenericDict& d, const std::string& what) {
  auto get = [&](const char* key) -> at::Tensor {
    for (const auto& e : d)
      if (e.key().isString() && e.key().toStringRef() == key && e.value().isTensor()) return e.value().toTensor();
    return {};
  };
  const at::Tensor boxes = get("boxes"), scores = get("scores"), labels = get("labels");
  if (!boxes.defined() || !scores.defined() || boxes.dim() != 2 || boxes.size(1) != 4 || scores.dim() != 1 ||
      scores.size(0) != boxes.size(0))
    throw DataError(what + ": a detection dictionary needs \"boxes\" [k, 4] and \"scores\" [k]");
  const int64_t k = boxes.size(0);
  return {boxes.to(at::kDouble), scores.to(at::kDouble),
          labels.defined() && labels.numel() == k ? labels.to(at::kLong).reshape({k}) : at::full({k}, -1, at::kLong)};
}

}  // namespace

c10::IValue run_host_postprocess(const HostPost& post, const std::vector<at::Tensor>& inputs,
                                 const std::vector<at::Tensor>& device) {
  if (device.size() != post.split.outputs.size())
    throw DataError("host post-processing: the deployed model gave " + std::to_string(device.size()) + " outputs, the host part reads " +
                    std::to_string(post.split.outputs.size()));
  std::unordered_map<std::string, at::Tensor> given;
  for (size_t i = 0; i < device.size(); ++i) given[post.split.outputs[i]] = device[i];
  HostRunner run(*post.traced, std::move(given));
  std::vector<c10::IValue> in(inputs.begin(), inputs.end());
  return run.run(std::move(in));
}

std::vector<ImageDetections> read_detections(const c10::IValue& out, const std::string& what) {
  if (out.isTuple() && !out.toTupleRef().elements().empty()) return read_detections(out.toTupleRef().elements()[0], what);
  std::vector<ImageDetections> images;
  if (out.isTensor()) {
    const at::Tensor t = out.toTensor();
    if (t.dim() != 3) throw DataError(what + ": a detection tensor of the batch must be [N, boxes, >= 5], got " + c10::str(t.sizes()));
    for (int64_t i = 0; i < t.size(0); ++i) images.push_back(from_rows(t[i], what));
    return images;
  }
  if (out.isList()) {
    for (const c10::IValue& e : out.toListRef()) {
      if (e.isTensor()) images.push_back(from_rows(e.toTensor(), what));
      else if (e.isGenericDict()) images.push_back(from_dict(e.toGenericDict(), what));
      else throw DataError(what + ": a list of detections holds tensors or dictionaries, not " + e.tagKind());
    }
    return images;
  }
  throw DataError(what + ": evaluation.metric detection reads a list of per-image detections (tensors [k, >= 5] or "
                  "dictionaries with boxes and scores) or a tensor [N, k, >= 5], not " + out.tagKind());
}

void match_detections(const ImageDetections& fp32, const ImageDetections& int8, double min_iou, PtqEvaluation* E) {
  const int64_t nf = fp32.boxes.size(0), nq = int8.boxes.size(0);
  E->has_detection = true;
  E->detection_min_iou = min_iou;
  ++E->detection_images;
  E->detection_fp32_boxes += nf;
  E->detection_int8_boxes += nq;
  if (nf == 0 || nq == 0) return;
  const at::Tensor a = fp32.boxes, b = int8.boxes;
  const at::Tensor area_a = (a.select(1, 2) - a.select(1, 0)).clamp_min(0) * (a.select(1, 3) - a.select(1, 1)).clamp_min(0);
  const at::Tensor area_b = (b.select(1, 2) - b.select(1, 0)).clamp_min(0) * (b.select(1, 3) - b.select(1, 1)).clamp_min(0);
  const at::Tensor lt = at::max(a.slice(1, 0, 2).unsqueeze(1), b.slice(1, 0, 2).unsqueeze(0));
  const at::Tensor rb = at::min(a.slice(1, 2, 4).unsqueeze(1), b.slice(1, 2, 4).unsqueeze(0));
  const at::Tensor wh = (rb - lt).clamp_min(0);
  const at::Tensor inter = wh.select(2, 0) * wh.select(2, 1);
  const at::Tensor iou = (inter / (area_a.unsqueeze(1) + area_b.unsqueeze(0) - inter).clamp_min(1e-12)).contiguous();
  const auto I = iou.accessor<double, 2>();
  const auto la = fp32.labels.accessor<int64_t, 1>(), lb = int8.labels.accessor<int64_t, 1>();
  const auto sa = fp32.scores.accessor<double, 1>(), sb = int8.scores.accessor<double, 1>();
  std::vector<char> taken(static_cast<size_t>(nq), 0);
  const at::Tensor order = fp32.scores.argsort(0, /*descending=*/true).contiguous();
  const auto O = order.accessor<int64_t, 1>();
  for (int64_t r = 0; r < nf; ++r) {
    const int64_t i = O[r];
    int64_t best = -1;
    double best_iou = min_iou;
    for (int64_t j = 0; j < nq; ++j)
      if (!taken[static_cast<size_t>(j)] && la[i] == lb[j] && I[i][j] >= best_iou) best = j, best_iou = I[i][j];
    if (best < 0) continue;
    taken[static_cast<size_t>(best)] = 1;
    ++E->detection_matched;
    E->detection_mean_iou += best_iou;  // sums until finish_detection_metric
    const double d = std::abs(sa[i] - sb[best]);
    E->detection_score_mean_abs_diff += d;
    E->detection_score_max_abs_diff = std::max(E->detection_score_max_abs_diff, d);
  }
}

void finish_detection_metric(PtqEvaluation* E) {
  const double m = static_cast<double>(E->detection_matched);
  E->detection_recall = E->detection_fp32_boxes ? m / static_cast<double>(E->detection_fp32_boxes) : 1.0;
  E->detection_precision = E->detection_int8_boxes ? m / static_cast<double>(E->detection_int8_boxes) : 1.0;
  E->detection_mean_iou = m > 0 ? E->detection_mean_iou / m : 0.0;
  E->detection_score_mean_abs_diff = m > 0 ? E->detection_score_mean_abs_diff / m : 0.0;
}

}  // namespace qfx::quant::pipeline
