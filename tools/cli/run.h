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
  std::string model;                 ///< the ONNX file
  std::string output;                ///< .npy to write (empty: print only)
  std::string backend = "onednn";    ///< runtime backend
  std::vector<std::string> inputs;   ///< .npy files, in input order, or NAME=FILE.npy
  std::vector<std::string> plugins;  ///< runtime plug-in libraries loaded first
  bool explain = false;              ///< print the kernel chosen per node
  bool onnx_arithmetic = false;      ///< ONNX's float requantization instead of the model's qfx.arithmetic
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
