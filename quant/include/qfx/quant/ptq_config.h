// The `qfx ptq` configuration file: model, data, calibration, evaluation, output.
#pragma once

#include <string>
#include <vector>

#include "qfx/quant/config.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/qconfig.h"

namespace qfx::quant {

/// The `training:` section of a `qfx qat` config.
struct TrainingConfig {
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
};

/// The whole PTQ config (see configs/ptq/default.yaml and the README).
struct PtqConfig {
  std::string path;                    ///< the config file
  std::string model;                   ///< TorchScript file
  std::vector<int64_t> input_shape;    ///< [-1, C, H, W]
  std::string backend = "onednn";
  TracerConfig tracer;                 ///< the `tracer:` section
  QConfigMapping qconfig;              ///< the `qconfig:` section
  DataSpec calibration;
  int64_t calibration_samples = 512;
  int64_t batch_size = 64;             ///< calibration.batch_size
  int64_t seed = 0;                    ///< calibration sample choice; -1: the first num_samples
  DataSpec evaluation;                 ///< `evaluation: null` (or absent): no evaluation
  int64_t evaluation_samples = 0;      ///< 0: all
  int64_t evaluation_batch_size = 64;  ///< evaluation.batch_size (also the latency batch)
  std::string metric = "top1";         ///< evaluation.metric: top1 (needs labels) or cosine (int8 vs fp32 outputs only)
  int64_t sqnr_samples = 256;          ///< evaluation images for the per-layer SQNR table (0: none)
  int64_t reference_check = 0;         ///< evaluation images also run on the reference backend (-1: all)
  std::string output_dir = "qfx_ptq_out";
  bool has_training = false;           ///< a `training:` section was given (qfx qat)
  TrainingConfig training;
};

/// Loads the file at `path` with `overrides` ("calibration.num_samples=64",
/// "qconfig.global.weight.bits=4") applied to every section first. Throws IoError if unreadable, ConfigError with file:line:column for an
/// unknown key, a wrong type or value, or a bad override.
PtqConfig load_ptq_config(const std::string& path, const std::vector<std::string>& overrides = {});

/// Expands ${VAR} (environment; QFX_FIXTURES defaults to the build's fixture
/// folder) and makes relative paths relative to `base_dir`.
std::string resolve_path(const std::string& p, const std::string& base_dir);

}  // namespace qfx::quant
