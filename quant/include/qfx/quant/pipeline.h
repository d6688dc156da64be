// The PTQ and QAT pipelines as library calls: what `qfx ptq` and `qfx qat` run.
// The CLI only parses arguments, draws progress from the hooks and prints the
// result; a program can call the same functions and read the same numbers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"
#include "qfx/quant/calibrate.h"
#include "qfx/quant/job_config.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/ptq_algorithms.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/registry.h"

namespace qfx::quant {

/// Callbacks a pipeline calls while it works (all optional, on the calling thread).
struct PipelineHooks {
  /// Progress of a long stage: `stage` ("calibration", "evaluation (fp32 + int8)",
  /// "epoch 1/3", ...), `done` of `total` images, `extra` a short status
  /// ("loss 0.41  acc 86.2%  lr 0.0100") or "".
  std::function<void(const std::string& stage, int64_t done, int64_t total, const std::string& extra)> progress;
  /// One informational line ("resumed from ckpt.pt at step 300").
  std::function<void(const std::string& line)> info;
};

/// Per-layer error of one quantized activation against its fp32 value.
struct LayerSqnr {
  std::string node;                ///< fx node whose output is quantized
  double sqnr_db_fakequant = 0;    ///< Q/DQ simulated on the runtime, dB
  double sqnr_db_int8 = 0;         ///< the deployed int8 kernels, dB (valid if has_int8)
  bool has_int8 = false;           ///< false: the value is not an int8 tensor in the deployed model
  /// The layer's own error: fake quantization with every quantized value before it
  /// replaced by its fp32 value (teacher forcing), so only this layer's weights,
  /// input rounding and output rounding count; dB (valid if has_own).
  double sqnr_db_own = 0;
  /// The error the layer inherits: the fake-quant value against the layer-alone
  /// value, the part its quantized inputs bring from upstream; dB (valid if has_own).
  double sqnr_db_inherited = 0;
  bool has_own = false;            ///< false: the split was not measured (a value kept on a device)
  std::string value;               ///< the quantized tensor's name in the int8 ONNX model (a lookup
                                   ///< table's node is named after another fx node: match by this)
};

/// What `qfx ptq` measures on the evaluation data.
/// One int8 layer under a target's arithmetic against ONNX's float requantization
/// of the same model (differences compound downstream).
struct ArithmeticLayerDiff {
  std::string node;          ///< fx node of the encoding
  int64_t codes = 0;         ///< int8 codes compared
  int64_t differing = 0;     ///< of those, codes that differ
  int max_abs_diff = 0;      ///< largest difference, in codes
};

/// int8 against fp32 on one model output, over every evaluated sample.
struct OutputAgreement {
  std::string name;    ///< the ONNX output name ("output", "output_1", a dictionary key)
  double cosine = 0;   ///< of the whole output tensor
  double sqnr_db = 0;  ///< dB
};

struct PtqEvaluation {
  int64_t images = 0;
  int64_t batch_size = 0;                       ///< evaluation.batch_size
  std::string metric = "top1";                  ///< evaluation.metric
  double fp32_runtime_vs_libtorch_max_rel_error = 0;  ///< first batch: runtime fp32 vs libtorch
  double cosine_int8_vs_fp32 = 0;               ///< whole output tensor
  double sqnr_db_int8_vs_fp32 = 0;              ///< dB
  /// Every float32 output of the model, in order (the evaluated one included): a
  /// model with several outputs is judged on each.
  std::vector<OutputAgreement> outputs;
  /// The float model's output is the same for every sample: agreement metrics say nothing.
  bool fp32_output_constant = false;
  double fp32_ms_per_image = 0, int8_ms_per_image = 0;  ///< runtime latency, first (planning) batch left out
  /// Where the int8 time goes: kernel milliseconds per node, summed over the
  /// evaluated images (runtime::Model::profile), in execution order.
  std::vector<runtime::NodeTime> profile_int8;
  bool has_top1 = false;                        ///< metric top1 with labels
  double top1_fp32 = 0, top1_int8 = 0;          ///< fractions in [0, 1]
  double prediction_agreement = 0;              ///< int8 argmax == fp32 argmax, fraction
  /// metric miou: per-pixel classes (argmax over axis 1 of [N, K, H, W]) of int8 against
  /// fp32: intersection over union per class present in either map, averaged over
  /// those classes, and the fraction of pixels whose class agrees.
  bool has_miou = false;
  double miou_int8_vs_fp32 = 0, pixel_agreement = 0;   ///< mean IoU in [0, 1]; fraction of pixels
  int64_t miou_classes = 0;                     ///< classes present in either map
  /// metric miou with per-pixel labels [N, H, W] (evaluation.data.labels; values outside
  /// [0, classes) are ignored, e.g. 255 for VOC's borders): mean IoU of each model's
  /// classes against the labels, over the classes present in the labels or the prediction.
  bool has_miou_labels = false;
  double miou_fp32_vs_labels = 0, miou_int8_vs_labels = 0;
  int64_t miou_label_classes = 0;               ///< classes present (fp32 against labels)
  int64_t labelled_pixels = 0;                  ///< pixels with a label in [0, classes)
  /// metric detection (a detector whose post-processing split_host_postprocess left to
  /// the host): the host part run on the fp32 and on the int8 network outputs, and
  /// fp32's boxes matched to int8's greedily in descending score (same label, IoU at
  /// least detection_min_iou), as COCO matches detections to ground truth.
  bool has_detection = false;
  double detection_min_iou = 0.5;
  int64_t detection_images = 0, detection_fp32_boxes = 0, detection_int8_boxes = 0;
  int64_t detection_matched = 0;                ///< matched pairs
  double detection_recall = 0;                  ///< matched / fp32 boxes (1 when fp32 found none)
  double detection_precision = 0;               ///< matched / int8 boxes (1 when int8 found none)
  double detection_mean_iou = 0;                ///< IoU of the matched pairs, averaged
  double detection_score_mean_abs_diff = 0;     ///< |fp32 score - int8 score| over matched pairs
  double detection_score_max_abs_diff = 0;
  int64_t sqnr_images = 0;                      ///< images of the per-layer table
  std::vector<LayerSqnr> layers;                ///< worst first
  int64_t reference_images = 0;                 ///< images also run on the reference backend (0: no check)
  int64_t reference_identical = 0;              ///< of those, outputs bit-identical to the runtime backend's
  double reference_max_abs_diff = 0;
  /// The int8 model has no float groups (runtime_float_groups empty): its outputs
  /// must equal the reference's bit for bit. With float groups (layers kept float,
  /// ops without int8 kernels) the backends' float sums round differently, so the
  /// check reports the difference without requiring equality.
  bool reference_exact_expected = true;
  /// Without exact_expected: the ops the int8 model computes in float32, by op type
  /// ("MatMul x24, Erf x6"; a weight-only model's dequantized weights among them).
  std::string reference_float_ops;
  /// A target arithmetic other than ONNX's (BackendConfig::arithmetic): per layer,
  /// the target's codes against float requantization on the per-layer SQNR images,
  /// most differing first; and top-1 of the same int8 model with float requantization.
  std::string arithmetic;                       ///< the target's arithmetic (runtime::Arithmetic::to_json), "" for ONNX's
  int64_t arithmetic_images = 0;                ///< images of the per-layer code comparison
  std::vector<ArithmeticLayerDiff> arithmetic_layers;
  bool has_top1_float_requant = false;
  double top1_float_requant = 0;
};

/// What the PTQ algorithms did (report.json "algorithms", "sensitivity",
/// "auto_fallback"); a vector stays empty for an algorithm that did not run.
struct PtqAlgorithmReports {
  std::vector<EqualizedPair> cross_layer_equalization;  ///< ptq.cross_layer_equalization
  std::vector<SmoothedNorm> smoothquant;                ///< ptq.smoothquant
  AwqResult awq;                                        ///< ptq.awq
  bool has_range_search = false;                        ///< ptq.range_search ran
  RangeSearchResult range_search;                       ///< its candidates and choice
  std::vector<LayerAlgorithmReport> adaround;           ///< ptq.adaround
  GptqResult gptq;                                      ///< ptq.gptq
  std::vector<LayerAlgorithmReport> bias_correction;    ///< ptq.bias_correction
  bool has_sensitivity = false;                         ///< ptq.sensitivity ran
  int64_t sensitivity_samples = 0;                      ///< calibration samples the sensitivity used
  double sensitivity_all_db = 0;                        ///< output SQNR with every layer quantized, dB
  std::vector<LayerSensitivity> sensitivity;            ///< most sensitive first
  bool has_auto_fallback = false;                       ///< ptq.auto_fallback ran
  AutoFallbackResult auto_fallback;                     ///< the search's steps and metrics
  std::string auto_fallback_config;                     ///< config_final.yaml as committed
  /// The deployed model on the held-out samples (the search measures fake
  /// quantization in libtorch): top-1 in percent (metric top1) or output SQNR in dB.
  double deployed_fp32 = 0, deployed_int8 = 0, deployed_sqnr_db = 0;
  bool has_mixed_precision = false;                     ///< ptq.mixed_precision ran
  MixedPrecisionResult mixed_precision;                 ///< sensitivities, the front, the choice
  std::string mixed_precision_config;                   ///< config_final.yaml as committed
};

/// Everything `qfx ptq` prints and writes to report.json.
struct PtqResult {
  int rank = 0, world_size = 1;        ///< this process in a data-parallel run (outputs come from rank 0)
  std::string model, config;           ///< TorchScript file, config file
  std::string backend;                 ///< the BackendConfig's name
  std::string runtime_backend;         ///< the runtime backend that calibrated and ran int8
  std::string output_dir;
  CalibrationResult calibration;
  double calibration_images_per_s = 0;
  std::vector<std::string> float_fallbacks;       ///< prepare_fx: modules kept float, with reasons
  std::vector<std::string> runtime_float_groups;  ///< runtime: QDQ groups left float, with reasons
  std::vector<std::string> export_float_ops;      ///< convert: ops exported in float
  std::vector<runtime::KernelChoice> kernel_report;  ///< int8 model: implementation per node, declines
  /// split_host_postprocess: the post-processing left to the host (float, not in
  /// the deployed model) and the deployed model's outputs it reads; empty if none.
  HostSplit host_postprocess;
  size_t traced_nodes = 0;                        ///< nodes of the traced graph
  PtqAlgorithmReports algorithms;
  bool evaluated = false;                         ///< an evaluation section was given
  PtqEvaluation evaluation;
  std::vector<std::string> outputs;               ///< files written (model_int8.onnx, encodings.json, report.json)
  /// convert_fx's output: the reference quantized model, runnable in libtorch.
  std::shared_ptr<fx::GraphModule> converted;
  double seconds = 0;
};

/// PTQ end to end: trace -> prepare_fx -> calibrate (on the runtime backend the
/// backend file names) -> convert (int8 QDQ ONNX + encodings) -> evaluate fp32 and
/// int8 on the runtime (top-1 or cosine, latency, per-layer SQNR, the reference
/// backend check) -> report.json. Outputs go to `cfg.output.dir` under temporary
/// names and are renamed into place only when everything succeeded.
/// Throws ConfigError (config without calibration data, metric top1 without labels),
/// IoError (model or data files, unwritable output), DataError (data that does not
/// fit the model), TraceError, UnsupportedOpError.
/// With an active `dist` (distributed::init_from_env), the run is data-parallel:
/// each rank calibrates its shard of the calibration batches (see
/// CalibrateOptions::distributed: the qparams equal a single-process run's),
/// then the other ranks return (no outputs; `rank` says which) and rank 0 alone
/// runs the rest and writes the outputs; DistributedError if a rank fails.
PtqResult ptq(const JobConfig& cfg, const PipelineHooks& hooks = {}, distributed::Context* dist = nullptr);

/// Whether a data-parallel run of `world` processes (`training`: qfx qat, else qfx ptq)
/// gives every process work, checked by the --nproc launcher before it starts any:
/// opens the calibration (or training) data to count its samples. Throws ConfigError
/// for fewer calibration batches than processes, or a last global training batch that
/// leaves a rank without samples (both counts and the keys to change); IoError /
/// DataError for data the job itself would refuse.
void check_world_size(const JobConfig& cfg, int world, bool training);

/// One point of the QAT training curve (about 100 over a run, and each epoch's end).
struct TrainingPoint {
  int64_t step = 0, epoch = 0;  ///< after this optimizer step (1-based), in this epoch (1-based)
  double loss = 0;              ///< moving average of the training loss over the run
  double train_accuracy = 0;    ///< moving average of the training batches' accuracy, fraction
};

/// Everything `qfx qat` prints and writes to report.json.
struct QatResult {
  int rank = 0, world_size = 1;        ///< this process in a data-parallel run (outputs come from rank 0)
  /// Data-parallel: every rank's scales and zero points equal rank 0's after training.
  bool qparams_identical_on_all_ranks = true;
  std::string model, config, backend, runtime_backend, output_dir;
  std::string checkpoint;               ///< the checkpoint written after each epoch
  int64_t steps = 0;                    ///< optimizer steps done (resumed ones included)
  int64_t resumed_at = -1;              ///< step of the checkpoint resumed from (-1: fresh start)
  double ms_per_step = 0;               ///< training step time, steps run in this process
  double final_loss_ema = 0;
  double fwd_bwd_ms_fake_quant = 0, fwd_bwd_ms_float = 0;  ///< one batch, medians of 7
  int64_t eval_images = 0;
  double top1_fp32 = 0, top1_fakequant = 0, top1_int8 = 0;  ///< fractions
  double int8_agrees_with_fakequant = 0;                    ///< fraction of predictions
  /// evaluation.reference_check: images also run on the reference backend, and how
  /// many outputs were bit-identical to the runtime backend's (required when the
  /// int8 model has no float groups, `reference_exact_expected`).
  int64_t reference_images = 0, reference_identical = 0;
  double reference_max_abs_diff = 0;
  bool reference_exact_expected = true;
  std::string reference_float_ops;  ///< as PtqEvaluation::reference_float_ops
  std::vector<TrainingPoint> curve;     ///< the training curve, in step order
  std::vector<std::string> float_fallbacks, runtime_float_groups;
  std::vector<runtime::KernelChoice> kernel_report;
  std::vector<std::string> outputs;
  /// convert_fx's output: the reference quantized model, runnable in libtorch.
  std::shared_ptr<fx::GraphModule> converted;
  double seconds = 0;
};

/// QAT end to end: trace -> prepare_qat_fx -> (optional calibration of the
/// observers) -> training loop (libtorch autograd; optimizer, lr schedule,
/// freeze_bn_after, disable_observer_after; a checkpoint after every epoch;
/// resume) -> fake-quant evaluation -> convert -> int8 evaluation on the runtime.
/// Throws ConfigError (no training or labelled evaluation section), IoError, DataError.
/// With an active `dist`: data-parallel training (see docs/distributed.md, "More than one
/// process"): rank 0's model is broadcast, each rank trains on its slice of
/// every global batch (training.batch_size per rank), gradients are averaged
/// (GradientReducer) and observers all-reduced each step while enabled; rank 0
/// writes the checkpoints and outputs; batch-norm statistics are per rank.
QatResult qat(const JobConfig& cfg, const PipelineHooks& hooks = {}, distributed::Context* dist = nullptr);

}  // namespace qfx::quant
