// Internal: the stages `quant::ptq` and `quant::qat` are composed of. Each stage
// is a function in its own file with explicit inputs and outputs:
//
//   open data -> prepare (trace, host split, prepare_fx, CLE, SmoothQuant)
//   -> lower (float ONNX once, one runtime model) -> calibrate -> refine
//   (sensitivity, AdaRound, bias correction) -> auto_fallback (a change to the
//   QConfigMapping; prepare, lower, calibrate again) -> convert (int8 ONNX)
//   -> evaluate (fp32 vs int8, per-layer SQNR, target arithmetic, reference check)
//   -> write (encodings, report.json from the result struct, report.html).
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artifacts.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/lowered_model.h"
#include "qfx/quant/pipeline.h"
#include "qfx/quant/ptq_algorithms.h"
#include "qfx/error.h"

namespace qfx::quant::pipeline {

/// What every stage reads: the job's config, its resolved backend, the hooks.
struct Job {
  const JobConfig& cfg;
  const BackendConfig& backend;
  const PipelineHooks& hooks;
  /// Index of the evaluated output among the model's outputs (evaluation.output; a
  /// dictionary key is resolved on the traced graph by resolve_output).
  int64_t output = 0;
  /// The config file, for error messages.
  const std::string& config() const { return cfg.path; }
  /// The runtime backend that calibrates and runs the int8 model.
  const std::string& runtime() const { return backend.runtime; }
};

/// Checks what every job needs before any work: the model file exists (IoError
/// naming model.path and the config).
void check_model_file(const Job& job);

// ---- ptq_data.cpp

/// The data of a PTQ job, opened and checked before any long work.
struct PtqData {
  std::unique_ptr<Dataset> cal;  ///< calibration samples
  std::unique_ptr<Dataset> ev;   ///< evaluation samples; null without an evaluation section
  HeldOutData held;              ///< ptq.auto_fallback's held-out batches
  bool int16_available = false;  ///< the backend offers s16 activations
};
/// Opens calibration, evaluation and held-out data. Throws ConfigError (auto_fallback
/// candidates the backend cannot give, metric top1 without labels, fewer
/// calibration batches than processes), IoError, DataError (no samples).
PtqData open_ptq_data(const Job& job, int world);

// ---- prepare_stage.cpp

/// A traced, prepared model and what preparing it found.
struct PreparedModel {
  std::shared_ptr<fx::GraphModule> gm;  ///< prepare_fx's output, eval mode
  HostSplit host;                       ///< post-processing left on the host
  /// The traced model before the split (its host nodes included), when there is one:
  /// evaluation.metric detection runs its host part (detection.h).
  std::shared_ptr<fx::GraphModule> traced;
  size_t traced_nodes = 0;              ///< nodes of the traced graph
};
/// Traces model.path, splits the host post-processing off, prepares for `qc`
/// (its warnings said when `say_warnings`) and runs the algorithms that change
/// the float model: cross-layer equalisation, SmoothQuant (reports into `alg`).
PreparedModel prepare_stage(const Job& job, const QConfigMapping& qc, Dataset& cal, bool say_warnings,
                            PtqAlgorithmReports* alg);
/// The options that lower a job's prepared model (LoweredModel).
LowerOptions lower_options(const Job& job);
/// Sets job.output from evaluation.output: the index, or the position of the key
/// among the keys of the dictionary `gm` returns. Throws ConfigError naming the key
/// and the model's keys when it has no such key.
void resolve_output(Job& job, const fx::GraphModule& gm);

// ---- calibrate_stage.cpp

/// Calibrates `gm` on its lowered float model with the calibration data (this
/// rank's shard with an active `dist`); afterwards the model is in fake-quant
/// state with its observers off.
CalibrationResult calibrate_stage(const Job& job, fx::GraphModule& gm, LoweredModel& lowered, Dataset& cal,
                                  distributed::Context* dist);

// ---- refine_stage.cpp

/// ptq.range_search: throws ConfigError naming the config when `gm` (prepared,
/// not yet calibrated) has no histogram-observed activation for it to choose for.
void check_range_search(const Job& job, fx::GraphModule& gm);
/// ptq.range_search on the calibrated model: the activation range algorithm
/// with the best output SQNR stays in place (into `alg`).
void range_search_stage(const Job& job, fx::GraphModule& gm, Dataset& cal, PtqAlgorithmReports* alg);
/// ptq.sensitivity: per-layer sensitivity on calibration samples (into `alg`).
void sensitivity_stage(const Job& job, fx::GraphModule& gm, Dataset& cal, PtqAlgorithmReports* alg);
/// ptq.gptq on the calibrated model (its report into `alg`, a summary line).
void gptq_stage(const Job& job, fx::GraphModule& gm, Dataset& cal, PtqAlgorithmReports* alg);
/// ptq.adaround, ptq.gptq and ptq.bias_correction on the calibrated model (reports
/// into `alg`). Returns the float weights they started from (empty when none runs).
FloatWeights refine_stage(const Job& job, fx::GraphModule& gm, Dataset& cal, PtqAlgorithmReports* alg);

// ---- fallback_stage.cpp

/// The layers ptq.auto_fallback moves out of int8.
struct FallbackMoves {
  std::vector<std::string> to_float, to_int16;  ///< module paths
  bool empty() const { return to_float.empty() && to_int16.empty(); }
};
/// Runs the search on the calibrated (and refined) model; its report into `alg`.
FallbackMoves fallback_stage(const Job& job, fx::GraphModule& gm, const PtqData& data, const FloatWeights& reference,
                             PtqAlgorithmReports* alg);
/// `qc` with the moved layers float (null qconfig) or with s16 activations (the
/// global qconfig otherwise): the mapping config_final.yaml loads to.
QConfigMapping with_fallback(const QConfigMapping& qc, const FallbackMoves& moves);
/// Stages config_final.yaml, the config that reproduces the deployed model.
void write_final_config(const Job& job, const FallbackMoves& moves, const Staging& out, PtqAlgorithmReports* alg);
/// The deployed fp32 and int8 models on the held-out samples (into `alg`).
void fallback_deployed(const Job& job, const runtime::Model& fp32, const runtime::Model& int8, const HeldOutData& held,
                       const std::string& out_name, PtqAlgorithmReports* alg);

// ---- mixed_stage.cpp

/// ptq.mixed_precision on the calibrated model: the search (into `alg`), its
/// summary on the console, and config_final.yaml staged in `out`; returns the
/// mapping the deployed model is prepared with.
QConfigMapping mixed_stage(const Job& job, fx::GraphModule& gm, Dataset& cal, const Staging& out, PtqAlgorithmReports* alg);

// ---- convert_stage.cpp

/// The int8 model: its export, the file parsed once, and the runtime model that
/// runs it. The stages that need it planned otherwise (unfused for the fake-quant
/// SQNR, on the reference backend, with ONNX's arithmetic) load `parsed`.
struct Int8Model {
  std::string path;            ///< the staged model_int8.onnx
  ExportResult exported;       ///< encodings, float ops
  runtime::ParsedModel parsed; ///< model_int8.onnx parsed (Model::parse), the one parse of the job
  runtime::Model model;        ///< `parsed` loaded on the job's runtime backend
  std::string output;          ///< the ONNX name of evaluation.output
};
/// convert_fx + export_onnx into the staging folder, parsed once and loaded on the runtime.
/// Fills `converted`, the float fallbacks, runtime float groups and kernel report of `r`.
template <typename Result>
Int8Model convert_stage(const Job& job, fx::GraphModule& gm, const Staging& out, Result* r);

// ---- tflite_stage.cpp

/// With `output.formats: [..., tflite]`: writes the staged int8 ONNX model at
/// `onnx_path` as model_int8.tflite into the staging folder (runtime::write_tflite),
/// right after convert so that a model TFLite cannot take fails before evaluation;
/// says on the console how many TFLite ops it has, and when the job's target
/// arithmetic is not TFLite's. Throws what write_tflite throws (nothing is
/// committed then).
void write_tflite_output(const Job& job, const std::string& onnx_path, const Staging& out);

// ---- aimet_stage.cpp

/// With `output.formats: [..., aimet]`: writes the staged int8 ONNX model at
/// `onnx_path` as model_aimet.onnx + model_aimet.encodings into the staging folder
/// (runtime::write_aimet) and prints what it wrote. Throws what write_aimet throws
/// (nothing is swapped in then).
void write_aimet_output(const Job& job, const std::string& onnx_path, const Staging& out);

// ---- evaluate.cpp

/// The fp32 model's output on the first evaluation batch in libtorch, before any
/// algorithm changes weights: the independent check of the runtime's fp32 graph.
/// Undefined without evaluation data.
at::Tensor libtorch_first_batch(const Job& job, fx::GraphModule& gm, Dataset* ev, const runtime::Model& fp32);
/// fp32 (the lowered float model) against int8 on every evaluation sample:
/// cosine, SQNR, top-1 or mean IoU, latency, the int8 profile (into `E`); with
/// `traced` (the model before split_host_postprocess, for metric detection) the host
/// post-processing on both models' outputs and their boxes' agreement. Returns the
/// int8 outputs.
at::Tensor evaluate_stage(const Job& job, const runtime::Model& fp32, runtime::Model& int8, const std::string& out_name,
                          Dataset& ev, const at::Tensor& libtorch_first, const PreparedModel& prepared, PtqEvaluation* E);

// ---- layer_sqnr.cpp

/// Per-layer SQNR of every quantized activation, fake-quant (Q/DQ on the runtime)
/// and int8, against the lowered fp32 values, on evaluation.sqnr_samples (into `E`).
void layer_sqnr_stage(const Job& job, const LoweredModel& fp32, const Int8Model& int8, Dataset& ev, PtqEvaluation* E);

// ---- reference_check.cpp

/// evaluation.reference_check: the int8 model on the reference backend against
/// the job's runtime backend.
struct ReferenceCheck {
  int64_t images = 0;          ///< 0: no check (none asked, or the runtime is the reference)
  int64_t identical = 0;       ///< outputs bit-identical
  double max_abs_diff = 0;
  bool exact_expected = true;  ///< no op of the int8 model computes in float
  std::string float_ops;       ///< else the ops that do, by type: "MatMul x24, Erf x6"
};
/// Runs the first evaluation.reference_check samples of `ev` on the reference
/// backend and compares with `int8_outputs` (the runtime backend's outputs of
/// `ev`, in order). Bit for bit is required only of models whose ops all run in
/// integers (float sums round in each backend's own order).
ReferenceCheck reference_check(const Job& job, const Int8Model& int8, Dataset& ev, const at::Tensor& int8_outputs);

// ---- qat_train.cpp

/// QAT's training loop on `train` (optimizer, learning-rate schedule,
/// freeze_bn_after / disable_observer_after, resume, a checkpoint at `ckpt` after
/// every epoch from rank 0; data-parallel with r->world_size > 1). Fills the
/// steps, loss, step time and training curve of `r`.
void train_stage(const Job& job, fx::GraphModule& gm, Dataset& train, distributed::Context* dist, const std::string& ckpt,
                 QatResult* r);
/// Forward + backward time of one training batch with fake quantization on and
/// off (observers and batch-norm statistics frozen afterwards).
void fake_quant_cost_stage(const Job& job, fx::GraphModule& gm, Dataset& train, QatResult* r);

// ---- qat_eval.cpp

/// Top-1 of `gm` in libtorch on `d` (labelled), its predictions into `pred`.
double top1_libtorch(const Job& job, fx::GraphModule& gm, Dataset& d, at::Tensor* pred, const std::string& what);
/// The int8 model's outputs on every sample of `d`, in order.
at::Tensor run_int8(const Job& job, const Int8Model& int8, Dataset& d);
/// Data-parallel: whether every rank's scales and zero points equal rank 0's.
bool qparams_identical_on_all_ranks(fx::GraphModule& gm, distributed::Context& dist);
/// report.json of a QAT run, from its result.
nlohmann::json qat_report_json(const QatResult& r, const TrainingConfig& training);

// ---- ptq_report.cpp

/// report.json of a PTQ run, from its result (`algorithms`: which ran, so that an
/// algorithm that found nothing to change still has its empty entry). The
/// observers, weights and seconds are added by write_reports.
nlohmann::json ptq_report_json(const PtqResult& r, const PtqAlgorithmsConfig& algorithms);

}  // namespace qfx::quant::pipeline
