// qfx qat (see qat.cpp).
#pragma once

#include <string>
#include <vector>

namespace qfx::cli {

/// Quantization-aware training as `config_path` describes (the PTQ keys plus
/// `training:`): trace, prepare_qat_fx, train with fake quantization in libtorch
/// (progress with loss and accuracy; the batch-norm freeze and observer schedule;
/// a checkpoint after every epoch, `training.resume` to continue), then convert_fx to
/// OUT/model_int8.onnx and evaluate fp32, fake-quant and int8 (the runtime). Writes
/// OUT/encodings.json and OUT/report.json. Errors are qfx::Error subclasses.
int run_qat(const std::string& config_path, const std::vector<std::string>& overrides);

}  // namespace qfx::cli
