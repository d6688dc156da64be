// The `qfx ptq` / `qfx qat` configuration file, one struct per section: model,
// tracer, backend, qconfig, calibration, evaluation, training, output.
#pragma once

#include <string>
#include <vector>

#include "qfx/quant/config.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/mixed_precision.h"
#include "qfx/quant/ptq_algorithms.h"
#include "qfx/quant/qconfig.h"

namespace qfx::quant {

/// The `model:` section.
struct ModelConfig {
  std::string path;                    ///< TorchScript file, torch.export program (.pt2) or float ONNX model (.onnx)
  std::vector<int64_t> input_shape;    ///< [-1, C, H, W]; -1 marks the batch dimension (an ONNX model's own when not given); the first input's
  /// Every input in order (forward's arguments, a torch.export program's or an ONNX
  /// model's graph inputs, whatever order model.inputs lists them in): from
  /// model.inputs, or one float32 input "input" of input_shape.
  std::vector<InputSpec> inputs;
  // model.libraries (operator libraries, .so) lands in TracerConfig::options.libraries.
};

/// The `calibration:` section (required by qfx ptq, optional for qfx qat).
struct CalibrationConfig {
  bool enabled = false;                ///< the section was given
  DataSpec data;                       ///< images; labels only for ptq.auto_fallback (metric top1)
  int64_t num_samples = 512;
  int64_t batch_size = 64;
  int64_t seed = 0;                    ///< sample choice; -1: the first num_samples
  /// Where histogram observers count: "cpu", or "cuda" (the GPU, the same counts;
  /// refused at load where no CUDA device can run kernels).
  std::string device = "cpu";
};

/// The `evaluation:` section (`evaluation: null` or absent: no evaluation).
struct EvaluationConfig {
  bool enabled = false;                ///< the section was given
  DataSpec data;
  int64_t num_samples = 0;             ///< 0: all
  int64_t batch_size = 64;             ///< also the latency batch
  /// top1 (needs labels), cosine (int8 vs fp32 outputs only) or miou (segmentation:
  /// mean IoU of the int8 model's per-pixel classes against the fp32 model's, [N, K, H, W]
  /// outputs; cosine reported too)
  std::string metric = "top1";
  int64_t sqnr_samples = 256;          ///< images for the per-layer SQNR table (0: none)
  int64_t reference_check = 0;         ///< images also run on the reference backend (-1: all)
  int64_t output = 0;                  ///< which model output is evaluated, by index (models with several)
  /// evaluation.output given as a name: the key of the dictionary the model returns
  /// (torchvision's segmentation models: "out"); resolved on the traced graph.
  std::string output_key;
};

/// The `training:` section of a `qfx qat` config.
struct TrainingConfig {
  bool enabled = false;              ///< the section was given
  DataSpec data;                     ///< training images and labels (labels required)
  int64_t num_samples = 0;           ///< 0: all
  int64_t epochs = 1;
  int64_t batch_size = 64;
  std::string optimizer = "sgd";     ///< sgd | adam
  double lr = 0.01;                  ///< peak learning rate
  double momentum = 0.9;             ///< sgd
  double weight_decay = 0.0;
  std::string lr_schedule = "cosine";  ///< constant | cosine (to 0 over all steps) | step (x0.1 at each of `lr_steps`)
  std::vector<int64_t> lr_steps;     ///< step schedule milestones (steps)
  int64_t freeze_bn_after = -1;      ///< steps; -1: never
  int64_t disable_observer_after = -1;  ///< steps; -1: never
  int64_t seed = 0;                  ///< shuffling
  int64_t max_steps = 0;             ///< stop after this many steps (0: epochs decide)
  std::string checkpoint;            ///< save here after every epoch (empty: OUT/qat_checkpoint.pt)
  std::string resume;                ///< load this checkpoint first (empty: start fresh)
  /// Where the training steps run: "cpu" (default), "cuda" or "cuda:N" (libtorch's
  /// CUDA kernels, loaded on demand; refused at load where no device can run them).
  /// Calibration, evaluation and convert run on the host either way.
  std::string device = "cpu";
};

/// The `ptq:` section: accuracy algorithms `qfx ptq` runs on the calibration
/// data (never on evaluation data). All off by default.
struct PtqAlgorithmsConfig {
  bool cross_layer_equalization = false;  ///< after prepare, before calibration
  bool smoothquant = false;               ///< after prepare (and equalisation), before calibration
  double smoothquant_alpha = 0.5;         ///< ptq.smoothquant: {alpha, num_samples}
  int64_t smoothquant_samples = 256;
  bool awq = false;                       ///< after prepare (and SmoothQuant), before calibration
  AwqOptions awq_options;                 ///< ptq.awq: {grid, num_samples, clip, max_shrink, clip_tokens}
  /// ptq.range_search: {candidates, num_samples}: right after calibration, the
  /// activation range algorithm with the best output SQNR (quant::range_search).
  bool range_search = false;
  RangeSearchOptions range_search_options;
  bool adaround = false;                  ///< after calibration
  AdaRoundOptions adaround_options;       ///< ptq.adaround: {iterations, lr, reg, beta: [start, end], warmup, batch_size, num_samples, seed}
  bool gptq = false;                      ///< after calibration (not with adaround)
  GptqOptions gptq_options;               ///< ptq.gptq: {damp, lazy_batch, act_order, num_samples}
  bool sensitivity = false;               ///< per-layer sensitivity of the calibrated model (report.json)
  int64_t sensitivity_samples = 256;      ///< ptq.sensitivity: {num_samples}
  bool bias_correction = false;           ///< after calibration and AdaRound
  int64_t bias_correction_samples = 256;  ///< ptq.bias_correction: {num_samples}
  /// ptq.auto_fallback: {metric, tolerance, min_sqnr_db, candidates, max_layers,
  /// ranking_samples, num_samples, data}: after calibration and the algorithms
  /// above, move the most sensitive layers to float until the held-out metric is
  /// within the tolerance (quant::auto_fallback), then prepare again with those
  /// layers' qconfig null and write the config that reproduces the run.
  bool auto_fallback = false;
  AutoFallbackOptions auto_fallback_options;
  int64_t auto_fallback_samples = 1000;   ///< held-out samples
  /// Held-out data; empty `images`: the calibration data's samples after the
  /// calibration subset (the same seeded draw, continued).
  DataSpec auto_fallback_data;
  /// ptq.mixed_precision: {candidates, block_size, budget: {weight_bytes,
  /// effective_bits, latency}, num_samples}: after calibration, one precision per
  /// layer within the budget (quant::mixed_precision), then prepare again with
  /// those qconfigs and write the config that reproduces the run. Not with
  /// auto_fallback.
  bool mixed_precision = false;
  MixedPrecisionOptions mixed_precision_options;
};

/// The `output:` section.
struct OutputConfig {
  /// Created if missing; files are replaced only on success. Without the key:
  /// `qfx_ptq_out` (`qfx_qat_out` for a config with a `training` section) in
  /// the current directory.
  std::string dir = "qfx_ptq_out";
  /// `qfx ptq` also writes model_fp32.onnx (default): the float model as the
  /// runtime runs it (batch norm folded), the fp32 side for `qfx bench` and other
  /// tools. `false`: not written.
  bool float_model = true;
  /// `qfx ptq` / `qfx qat` also write report.html (default): report.json drawn as
  /// one self-contained page (graph, per-layer SQNR, histograms, timings; see
  /// quant/report.h). `false`: not written.
  bool report_html = true;
  /// How block-wise 4-bit MatMul weights are written: "dequantize_linear" (default:
  /// standard ONNX, opset 21) or "matmul_nbits" (ONNX Runtime's com.microsoft
  /// MatMulNBits; ExportOptions::matmul_nbits).
  std::string block_weight_format = "dequantize_linear";
  /// With "matmul_nbits": the nodes' accuracy_level (ExportOptions::matmul_nbits_accuracy_level);
  /// 4 makes the deployed model W4A8 (int8 activations per block, on the fly).
  int64_t matmul_nbits_accuracy_level = 1;
  /// `output.formats` lists `tflite`: also write model_int8.tflite, the int8 model in
  /// TFLite's scheme (runtime::write_tflite; float input and output, NHWC).
  bool tflite = false;
  /// `output.tflite_io`: the .tflite's inputs and outputs as float32 ("float", the
  /// default: a QUANTIZE / DEQUANTIZE at the edges) or as int8 codes ("int8": what
  /// NPU compilers such as Vela place whole; runtime::TfliteOptions::int8_io).
  bool tflite_int8_io = false;
  /// `output.formats` lists `aimet`: also write model_aimet.onnx (the int8 model's
  /// float graph: Q/DQ pairs removed, weights and biases dequantized) and
  /// model_aimet.encodings (its quantization in Qualcomm AIMET's encodings format,
  /// what AIMET's QuantSim and QNN's converter load; runtime::write_aimet).
  bool aimet = false;
  /// `output.aimet_encoding_version`: "1.0.0" (the default; param_encodings and
  /// activation_encodings lists) or "2.0.0" (one encodings list, ONNX QDQ fields).
  std::string aimet_encoding_version = "1.0.0";
};

/// A whole `qfx ptq` / `qfx qat` config file (configs/ptq/default.yaml, the
/// docs/pipelines.md's config reference), one struct per section.
struct JobConfig {
  std::string path;                    ///< the config file
  /// The config as loaded, --set overrides applied, as YAML text (what
  /// `final_config_yaml` edits).
  std::string effective_yaml;
  ModelConfig model;
  std::string backend = "onednn";      ///< BackendConfig name or YAML file
  TracerConfig tracer;                 ///< the `tracer:` section
  QConfigMapping qconfig;              ///< the `qconfig:` section
  CalibrationConfig calibration;
  EvaluationConfig evaluation;
  TrainingConfig training;
  PtqAlgorithmsConfig ptq;             ///< the `ptq:` section
  OutputConfig output;
};

/// Loads the file at `path` with `overrides` ("calibration.num_samples=64",
/// "qconfig.global.weight.bits=4") applied to every section first. Relative
/// paths are relative to where they are written: a path in the file to the
/// file's folder (model, data, backend YAML, libraries, checkpoints, output.dir),
/// a path in an override to the current directory. Throws IoError if unreadable, ConfigError with file:line:column for an
/// unknown key, a wrong type or value, or a bad override.
JobConfig load_job_config(const std::string& path, const std::vector<std::string>& overrides = {});

/// The config that reproduces a run of `cfg` whose automatic fallback moved
/// `float_modules` to float and `int16_modules`' outputs to s16:
/// `cfg.effective_yaml` with `qconfig.module_name: {module: null}` for each float
/// one, `{module: <qconfig.global with activation.dtype s16>}` for each int16
/// one, `ptq.auto_fallback` removed, and the model, data, backend, checkpoint and
/// output paths made absolute (the file is written into the output folder). `header` becomes a
/// leading comment.
/// One `qconfig.module_name` entry a final config adds: a copy of the config's
/// entry that `matched_by` names ("global", "module_type:Linear",
/// "module_name:encoder", "module_name_regex:head\\..*"; an absent global: an
/// empty mapping) with the changes below, or null.
struct ModuleQConfigEdit {
  std::string module;                  ///< the module path (the module_name key)
  std::string matched_by;              ///< the entry copied, as QConfigMapping::resolve names it
  bool keep_float = false;             ///< write null
  int weight_bits = 0;                 ///< > 0: weight.bits
  int64_t weight_block_size = -1;      ///< > 0: granularity per_block with this block_size; 0: per_channel; -1: as is
  std::string activation_dtype;        ///< not empty: activation.dtype (and activation.bits removed)
};

/// The config that reproduces a run of `cfg` after `ptq.mixed_precision`: `edits`
/// as `qconfig.module_name` entries, `ptq.mixed_precision` removed, paths made
/// absolute as below; `header` becomes a leading comment.
std::string final_config_yaml(const JobConfig& cfg, const std::vector<ModuleQConfigEdit>& edits, const std::string& header);

std::string final_config_yaml(const JobConfig& cfg, const std::vector<std::string>& float_modules,
                              const std::vector<std::string>& int16_modules, const std::string& header);

/// Expands ${VAR} (environment; QFX_FIXTURES defaults to the build's fixture
/// folder) and makes relative paths relative to `base_dir`.
std::string resolve_path(const std::string& p, const std::string& base_dir);

}  // namespace qfx::quant
