// qfx run (tools/cli/run.cpp): the runtime alone, no libtorch.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace qfx::cli {

/// `qfx run`'s command line (see run_model).
struct RunArgs {
  std::string model, output, backend = "onednn";
  std::vector<std::string> inputs, plugins;
  bool explain = false, onnx_arithmetic = false;
};

/// Adds the `run` subcommand, its options stored into `args`, to `app`; returns it.
CLI::App* add_run_command(CLI::App& app, RunArgs& args);

/// `qfx run`: loads the ONNX model `args.model` (float or int8 QDQ) on runtime
/// `backend` (after loading `plugins`), feeds the .npy files of `inputs` (in the model's
/// input order, or NAME=FILE.npy), prints each output's shape and summary (and the
/// kernel per node with `explain`), and writes them as .npy to `output` (several
/// outputs: OUT.<name>.npy each). `onnx_arithmetic`: ONNX's float requantization
/// instead of the model's qfx.arithmetic. Returns 0; throws qfx::Error subclasses
/// (DataError for inputs, IoError for files, UnsupportedOp / ExecutionError from the runtime).
int run_model(const RunArgs& args);

}  // namespace qfx::cli
