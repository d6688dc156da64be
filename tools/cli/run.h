// qfx run (tools/cli/run.cpp): the runtime alone, no libtorch.
#pragma once

#include <string>
#include <vector>

namespace qfx::cli {

/// `qfx run`: loads the ONNX model at `path` (float or int8 QDQ) on runtime `backend`
/// (after loading `plugins`), feeds the .npy files of `input_args` (in the model's
/// input order, or NAME=FILE.npy), prints each output's shape and summary (and the
/// kernel per node with `explain`), and writes them as .npy to `output` (several
/// outputs: OUT.<name>.npy each). `onnx_arithmetic`: ONNX's float requantization
/// instead of the model's qfx.arithmetic. Returns 0; throws qfx::Error subclasses
/// (DataError for inputs, IoError for files, UnsupportedOp / ExecutionError from the runtime).
int run_model(const std::string& path, const std::vector<std::string>& input_args, const std::string& output,
              const std::string& backend, const std::vector<std::string>& plugins, bool explain, bool onnx_arithmetic);

}  // namespace qfx::cli
