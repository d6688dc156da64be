// qfx run: one ONNX model on the runtime, inputs from .npy files. Runtime only (no
// libtorch): the full qfx and the runtime-only build's share it.
#include "run.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <map>

#include "qfx/error.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/npy.h"

namespace qfx::cli {

namespace {

// Which implementation runs each node, and why the ones before it declined.
void print_kernel_report(const qfx::runtime::Model& model) {
  std::cout << "# kernels (backend " << model.backend() << "):\n";
  for (const auto& c : model.kernel_report()) {
    std::cout << "#   " << c.node << "  " << c.op << "  " << (c.folded ? "folded at plan time" : c.impl)
              << (c.device_outputs ? "  (output stays on the device)" : "") << "\n";
    for (const auto& d : c.declined) std::cout << "#       declined by " << d.impl << ": " << d.reason << "\n";
  }
}

// One output's line: shape, and for float32 its range and mean (and the argmax of the
// first rows of a [N, classes] output).
void print_summary(const std::string& name, const qfx::runtime::Tensor& t) {
  std::cout << name << ": " << t.describe();
  if (t.dtype() == qfx::runtime::DType::kFloat32 && t.numel() > 0) {
    const float* d = t.data<float>();
    double mn = d[0], mx = d[0], sum = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      mn = std::min<double>(mn, d[i]);
      mx = std::max<double>(mx, d[i]);
      sum += d[i];
    }
    std::cout << " min " << mn << " max " << mx << " mean " << sum / static_cast<double>(t.numel());
    if (t.shape().size() == 2) {
      std::cout << " argmax";
      const int64_t rows = std::min<int64_t>(t.shape()[0], 8), cols = t.shape()[1];
      for (int64_t r = 0; r < rows; ++r)
        std::cout << " " << (std::max_element(d + r * cols, d + (r + 1) * cols) - (d + r * cols));
      if (t.shape()[0] > rows) std::cout << " ...";
    }
  }
  std::cout << "\n";
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunArgs& a) {
  auto* run = app.add_subcommand("run", "Run an ONNX model (float or int8 QDQ) on the qfx runtime");
  run->add_option("model", a.model, "ONNX model (opset 13..21)")->required();
  run->add_option("--input,-i", a.inputs, "Input .npy file, in the model's input order, or NAME=FILE.npy")->required();
  run->add_option("--output,-o", a.output, "Save the output as .npy (several outputs: OUT.<name>.npy each)");
  run->add_option("--backend", a.backend, "Runtime backend: onednn (default), reference, cuda, or one a --plugin registers");
  run->add_option("--plugin", a.plugins, "Runtime plug-in shared library to load first (repeatable)");
  run->add_flag("--explain", a.explain, "Print which kernel implementation runs each node, and why faster ones declined");
  run->add_flag("--onnx-arithmetic", a.onnx_arithmetic,
                "Compute int8 ops with ONNX's float requantization, ignoring the model's qfx.arithmetic (a target's arithmetic)");
  return run;
}

int run_model(const RunArgs& a) {
  const std::string& path = a.model;
  const std::vector<std::string>& input_args = a.inputs;
  const std::string& output = a.output;
  qfx::runtime::ModelOptions mo;
  mo.backend = a.backend;
  mo.plugins = a.plugins;
  if (a.onnx_arithmetic) mo.arithmetic = qfx::runtime::Arithmetic{};
  auto model = qfx::runtime::Model::load(path, mo);
  std::map<std::string, qfx::runtime::Tensor> inputs;
  const auto& declared = model.inputs();
  for (size_t i = 0; i < input_args.size(); ++i) {
    std::string name, file = input_args[i];
    const auto eq = file.find('=');
    if (eq != std::string::npos) {
      name = file.substr(0, eq);
      file = file.substr(eq + 1);
    } else {
      if (i >= declared.size())
        throw qfx::DataError("more --input files than the model has inputs (" + std::to_string(declared.size()) + ")");
      name = declared[i].name;
    }
    inputs[name] = qfx::runtime::load_npy(file);
  }
  auto outs = model.run(inputs);
  std::cout << "# " << path << " on " << model.backend() << ": " << model.total_ops() << " ops, " << model.int8_ops()
            << " int8\n";
  for (const auto& f : model.float_fallbacks()) std::cout << "#   float: " << f << "\n";
  if (a.explain) print_kernel_report(model);
  for (const auto& info : model.outputs()) print_summary(info.name, outs.at(info.name));
  if (!output.empty()) {
    const auto& infos = model.outputs();
    for (const auto& info : infos) {
      std::string file = output;
      if (infos.size() > 1) {
        const std::string stem = file.size() > 4 && file.substr(file.size() - 4) == ".npy" ? file.substr(0, file.size() - 4) : file;
        file = stem + "." + info.name + ".npy";
      }
      qfx::runtime::save_npy(file, outs.at(info.name));
      std::cout << "wrote " << file << "\n";
    }
  }
  return 0;
}

}  // namespace qfx::cli
