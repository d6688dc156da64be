// YAML configuration files (qfx ptq / qat / inspect): loading with file:line:column
// errors. This header covers the `tracer` section; later sections build on the
// same checked reader.
#pragma once

#include <string>
#include <vector>

#include "qfx/fx/tracer.h"

namespace qfx::quant {

/// The `tracer:` section of a config file.
///
/// ```yaml
/// tracer:
///   wrap: ["_post_process", "module_type:DecodeHead", "function:topk_decode"]
///   use_model_annotations: true   # honour __qfx_wrap__ in the model (default true)
///   max_unroll: 4096              # loop unrolling bound (default 4096)
/// ```
struct TracerConfig {
  fx::TracerOptions options;
};

/// Loads the `tracer` section of the YAML file at `path`; other top-level keys are
/// accepted here only if they are known config sections (model, backend, qconfig,
/// calibration, evaluation, output, training, tracer). Throws `qfx::IoError` if
/// the file cannot be read and `qfx::ConfigError` with `path:line:column` for a
/// YAML syntax error, an unknown key, a wrong type or a bad value.
TracerConfig load_tracer_config(const std::string& path);

}  // namespace qfx::quant
