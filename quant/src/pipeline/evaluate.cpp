// Evaluate stage: the fp32 model (lowered) against the int8 model on the
// evaluation data, on the runtime; and libtorch's fp32 output as the check of both.
#include <optional>
#include <tuple>

#include "../algorithms/layers.h"
#include "detection.h"
#include "metrics.h"
#include "qfx/quant/fake_quantize.h"
#include "stages.h"

namespace qfx::quant::pipeline {

at::Tensor libtorch_first_batch(const Job& job, fx::GraphModule& gm, Dataset* ev, const runtime::Model& fp32) {
  if (!ev || ev->size() == 0) return {};
  output_name(fp32, job.output, job.config());  // ConfigError for an output the model lacks
  set_quant_state(gm, QuantState::kFloat);
  at::Tensor out = forward_output(gm, ev->batch_inputs(0, std::min(job.cfg.evaluation.batch_size, ev->size())), job.output);
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  return out;
}

namespace {

// Top-1 of both models when the metric is top1 (labels checked when the data was opened).
void top1(const at::Tensor& fp, const at::Tensor& q, const at::Tensor& labels, const std::string& labels_file,
          PtqEvaluation* E) {
  E->has_top1 = true;
  E->top1_fp32 = label_accuracy(fp.argmax(1), labels, fp.size(1), labels_file);
  E->top1_int8 = label_accuracy(q.argmax(1), labels, q.size(1), labels_file);
  E->prediction_agreement = q.argmax(1).eq(fp.argmax(1)).to(at::kDouble).mean().item<double>();
}

// Mean IoU of class maps `a` against `b` (flat, values in [0, K)): per class present in
// either, intersection over union, averaged; {mean IoU, classes present}.
std::pair<double, int64_t> mean_iou(const at::Tensor& a, const at::Tensor& b, int64_t K) {
  const at::Tensor inter = at::bincount(a.masked_select(a.eq(b)), {}, K).to(at::kDouble);
  const at::Tensor ca = at::bincount(a, {}, K).to(at::kDouble), cb = at::bincount(b, {}, K).to(at::kDouble);
  const at::Tensor uni = ca + cb - inter, present = uni.gt(0);
  const int64_t classes = present.sum().item<int64_t>();
  return {classes ? (inter.masked_select(present) / uni.masked_select(present)).mean().item<double>() : 1.0, classes};
}

// Mean IoU of the per-pixel classes of `q` against `fp` ([N, K, ...]: class axis 1),
// and of both against per-pixel `labels` ([N, ...], values outside [0, K) ignored) when given.
void miou(const Job& job, const at::Tensor& fp, const at::Tensor& q, const at::Tensor& labels, PtqEvaluation* E) {
  if (fp.dim() < 3)
    throw ConfigError(job.config() + ": evaluation.metric miou needs per-pixel class scores [N, classes, H, W]; output " +
                      std::to_string(job.output) + " has rank " + std::to_string(fp.dim()));
  const int64_t K = fp.size(1);
  const at::Tensor a = fp.argmax(1), b = q.argmax(1);
  E->has_miou = true;
  std::tie(E->miou_int8_vs_fp32, E->miou_classes) = mean_iou(a.flatten(), b.flatten(), K);
  E->pixel_agreement = a.eq(b).to(at::kDouble).mean().item<double>();
  if (!labels.defined()) return;
  if (labels.sizes() != a.sizes())
    throw DataError(job.cfg.evaluation.data.labels + ": evaluation.metric miou compares per-pixel labels " +
                    c10::str(labels.sizes()) + " with the output's class map " + c10::str(a.sizes()));
  const at::Tensor valid = labelled(labels, K);
  const at::Tensor l = labels.masked_select(valid);
  E->has_miou_labels = true;
  E->labelled_pixels = l.numel();
  std::tie(E->miou_fp32_vs_labels, E->miou_label_classes) = mean_iou(a.masked_select(valid), l, K);
  E->miou_int8_vs_labels = mean_iou(b.masked_select(valid), l, K).first;
}

// metric detection on one batch: the host post-processing on each model's outputs (all
// of them, in the deployed model's order), then the boxes matched image by image.
void detection_batch(const HostPost& post, const std::vector<at::Tensor>& inputs, const runtime::Model& int8,
                     const std::map<std::string, runtime::Tensor>& fo, const std::map<std::string, runtime::Tensor>& qo,
                     PtqEvaluation* E) {
  std::vector<at::Tensor> f, q;
  for (const auto& o : int8.outputs()) {
    f.push_back(to_aten(fo.at(o.name)));
    q.push_back(to_aten(qo.at(o.name)));
  }
  const auto a = read_detections(run_host_postprocess(post, inputs, f), "the post-processing of the fp32 model's outputs");
  const auto b = read_detections(run_host_postprocess(post, inputs, q), "the post-processing of the int8 model's outputs");
  if (a.size() != b.size())
    throw DataError("evaluation.metric detection: the post-processing gave " + std::to_string(a.size()) + " images for fp32 and " +
                    std::to_string(b.size()) + " for int8");
  for (size_t i = 0; i < a.size(); ++i) match_detections(a[i], b[i], 0.5, E);
}

}  // namespace

at::Tensor evaluate_stage(const Job& job, const runtime::Model& fp32, runtime::Model& int8, const std::string& out_name,
                          Dataset& ev, const at::Tensor& libtorch_first, const PreparedModel& prepared, PtqEvaluation* E) {
  std::optional<HostPost> post;
  if (job.cfg.evaluation.metric == "detection") post = HostPost{prepared.traced, prepared.host};
  const int64_t n = ev.size(), ebs = job.cfg.evaluation.batch_size;
  // The evaluated output and every other float output, batch by batch, by name.
  std::map<std::string, std::vector<at::Tensor>> fp_all, q_all;
  // Latency leaves out the first batch, which also builds the plans (kernels, packed weights).
  double t_fp32 = 0, t_int8 = 0;
  int64_t timed = 0;
  int8.set_profiling(true);  // where the int8 time goes, per node
  for (int64_t i = 0; i < n; i += ebs) {
    const std::vector<at::Tensor> b = ev.batch_inputs(i, std::min(i + ebs, n));
    const std::map<std::string, runtime::Tensor> in = feed(fp32, b);
    const bool time_it = i > 0 || n <= ebs;
    auto t0 = Clock::now();
    const auto fo = fp32.run(in);
    if (time_it) t_fp32 += secs(t0);
    t0 = Clock::now();
    const auto qo = int8.run(in);
    if (time_it) {
      t_int8 += secs(t0);
      timed += b[0].size(0);
    }
    if (post) detection_batch(*post, b, int8, fo, qo, E);
    for (const auto& [name, t] : fo) {
      const bool both_float = t.dtype() == runtime::DType::kFloat32 && qo.count(name) &&
                              qo.at(name).dtype() == runtime::DType::kFloat32;
      if (name != out_name && !both_float) continue;
      fp_all[name].push_back(to_aten(t));  // the evaluated output must be float (DataError otherwise)
      q_all[name].push_back(to_aten(qo.at(name)));
    }
    if (i == 0) {  // independent check: the runtime's fp32 against libtorch on the first batch
      const at::Tensor& first = fp_all.at(out_name)[0];
      E->fp32_runtime_vs_libtorch_max_rel_error =
          ((first - libtorch_first).abs().max() / libtorch_first.abs().max().clamp_min(1e-12)).item<double>();
    }
    progress(job.hooks, "evaluation (fp32 + int8)", i + b[0].size(0), n);
  }
  const at::Tensor fp = at::cat(fp_all.at(out_name)), q = at::cat(q_all.at(out_name));
  E->profile_int8 = int8.profile();
  int8.set_profiling(false);
  E->images = n;
  E->batch_size = ebs;
  E->metric = job.cfg.evaluation.metric;
  E->cosine_int8_vs_fp32 = cosine(q, fp);
  E->sqnr_db_int8_vs_fp32 = detail::sqnr_db(fp, q);
  for (const auto& o : int8.outputs()) {
    if (o.name == out_name) {
      E->outputs.push_back({o.name, E->cosine_int8_vs_fp32, E->sqnr_db_int8_vs_fp32});
    } else if (fp_all.count(o.name)) {
      const at::Tensor f = at::cat(fp_all.at(o.name)), g = at::cat(q_all.at(o.name));
      E->outputs.push_back({o.name, cosine(g, f), detail::sqnr_db(f, g)});
    }
  }
  // A float model whose output is the same for every sample (all zero, a dead
  // network) makes any agreement metric meaningless: say so.
  E->fp32_output_constant = n > 1 && (fp - fp.select(0, 0).unsqueeze(0)).abs().max().item<double>() == 0.0;
  if (E->fp32_output_constant)
    info(job.hooks, "warning: the float model's output is the same for every evaluated sample; cosine, SQNR and "
                    "top-1 agreement say nothing about the quantization");
  E->fp32_ms_per_image = 1000.0 * t_fp32 / static_cast<double>(std::max<int64_t>(timed, 1));
  E->int8_ms_per_image = 1000.0 * t_int8 / static_cast<double>(std::max<int64_t>(timed, 1));
  if (job.cfg.evaluation.metric == "top1") top1(fp, q, ev.labels(), job.cfg.evaluation.data.labels, E);
  if (job.cfg.evaluation.metric == "miou") miou(job, fp, q, ev.labels(), E);
  if (post) finish_detection_metric(E);
  return q;
}

}  // namespace qfx::quant::pipeline
