// Internal: the model section's inputs (job_config.cpp's helper).
#pragma once

#include "qfx/quant/job_config.h"
#include "yaml_util.h"

namespace qfx::quant {

/// Fills `model->inputs` (and `input_shape`, the first input's shape) from the
/// `model:` mapping `m` of config `path`: model.input_shape gives one float32
/// input named "input"; model.inputs gives named inputs with shapes and dtypes; an
/// ONNX model's own inputs are taken when neither fixes them (one float32 input is
/// still fed as "input"). `model->path` is resolved already. Throws ConfigError
/// with file:line:column for a missing or ill-formed key, both keys at once, a
/// shape or dtype that does not fit the ONNX model, a static batch, or a dynamic
/// dim past the batch left open.
void read_model_inputs(const std::string& path, const YAML::Node& m, ModelConfig* model);

}  // namespace qfx::quant
