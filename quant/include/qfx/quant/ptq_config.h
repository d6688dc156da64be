// The `qfx ptq` configuration file: model, data, calibration, evaluation, output.
#pragma once

#include <string>
#include <vector>

#include "qfx/quant/config.h"
#include "qfx/quant/qconfig.h"

namespace qfx::quant {

/// A dataset as a config names it.
///
/// ```yaml
/// data: {format: idx, images: PATH.gz, labels: PATH.gz, mean: 0.2860, std: 0.3530}
/// data: {format: npy, images: PATH.npy, labels: LABELS.npy}   # float [N, C, H, W], int64 [N]
/// ```
/// Paths may use ${VAR} (environment, plus QFX_FIXTURES = the build's fixture
/// folder) and are relative to the config file's folder.
struct DataSpec {
  std::string format = "idx";
  std::string images;
  std::string labels;
  double mean = 0.0, std = 1.0;  ///< x <- (pixel / 255 - mean) / std (idx)
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
  int64_t batch_size = 64;
  int64_t seed = 0;
  DataSpec evaluation;                 ///< `evaluation: null` (or absent): no evaluation
  int64_t evaluation_samples = 0;      ///< 0: all
  std::string metric = "top1";         ///< top1 or cosine (against fp32)
  std::string output_dir = "qfx_ptq_out";
};

/// Loads the file at `path` with `overrides` ("calibration.num_samples=64",
/// "qconfig.global.weight.bits=4") applied to every section first. Throws IoError if unreadable, ConfigError with file:line:column for an
/// unknown key, a wrong type or value, or a bad override.
PtqConfig load_ptq_config(const std::string& path, const std::vector<std::string>& overrides = {});

/// Expands ${VAR} (environment; QFX_FIXTURES defaults to the build's fixture
/// folder) and makes relative paths relative to `base_dir`.
std::string resolve_path(const std::string& p, const std::string& base_dir);

}  // namespace qfx::quant
