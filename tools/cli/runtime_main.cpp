// qfx of the runtime-only build (-DQFX_RUNTIME_ONLY=ON): `qfx run` and `qfx bench`
// on the runtime alone, for deployment machines without libtorch or Python.
#include <CLI/CLI.hpp>

#include <iostream>

#include "messages.h"
#include "parse_error.h"
#include "run.h"
#include "runtime_bench.h"
#include "qfx/error.h"
#include "qfx/runtime/model.h"
#include "qfx/version.h"

int main(int argc, char** argv) {
  CLI::App app{"qfx (runtime-only build): run and time quantized ONNX models"};
  app.require_subcommand(1);
  std::string versions = std::string("qfx ") + qfx::version() + " (runtime only";
  for (const auto& [name, v] : qfx::runtime::library_versions()) versions += ", " + name + " " + v;
  app.set_version_flag("--version", versions + ")", "Print qfx's version and those of the libraries it runs on");

  qfx::cli::RunArgs rargs;
  auto* run = qfx::cli::add_run_command(app, rargs);

  auto* bench = app.add_subcommand("bench", "Latency of ONNX models on several runtime backends, side by side in one run");
  qfx::cli::RuntimeBenchArgs b;
  bench->add_option("models", b.models, "ONNX models (float or int8 QDQ) with float32 inputs")->required();
  bench->add_option("--backends", b.backends, "Runtime backends; ratios are against the first (default onednn,cuda)")
      ->delimiter(',');
  bench->add_option("--batch", b.batches, "Batch sizes (default 1,32)")->delimiter(',')->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  bench->add_option("--iters", b.iters, "Timed runs per row (default 20)")->check(CLI::Range(1, 1000000));
  bench->add_flag("--peak", b.peak, "Measure this machine's fp32 and int8 peak first (large oneDNN matmuls); adds each row's fraction of it");

  // The full build's commands, named so that their absence is explained.
  for (const char* name : {"ptq", "qat", "inspect", "ops", "report"})
    app.add_subcommand(name, std::string("(full build only)"))->allow_extras();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return qfx::cli::report_parse_error(app, argc, argv, e);
  }
  const std::string cmd = app.get_subcommands().at(0)->get_name();
  try {
    if (*run) return qfx::cli::run_model(rargs);
    if (*bench) return qfx::cli::run_runtime_bench(b);
    std::cerr << "qfx " << cmd << ": this qfx is a runtime-only build (QFX_RUNTIME_ONLY): it runs and times quantized "
                 "models; " << cmd << " needs the full build with libtorch (README)\n";
    return 2;
  } catch (...) {
    return qfx::cli::report_exception(cmd, "an input or a batch larger than this machine's memory");
  }
}
