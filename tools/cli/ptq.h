// qfx ptq (see ptq.cpp).
#pragma once

#include <string>
#include <vector>

namespace qfx::cli {

/// Runs post-training quantization as `config_path` describes (overrides:
/// "key.sub=value"): trace, prepare_fx, calibrate, convert_fx to
/// OUT/model_int8.onnx, evaluate fp32 (libtorch) against int8 (the runtime), and
/// write OUT/encodings.json and OUT/report.json. Prints a summary. Errors are
/// qfx::Error subclasses (the CLI maps them to exit codes).
int run_ptq(const std::string& config_path, const std::vector<std::string>& overrides);

}  // namespace qfx::cli
