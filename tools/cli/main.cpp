// The `qfx` command-line tool.
#include <CLI/CLI.hpp>

#include <iostream>

#include "qfx/error.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/config.h"
#include "qfx/quant/passes.h"

namespace {

struct PrepareArgs {
  std::string backend;  // empty: print the traced graph only
  bool qat = false;
};

int run_inspect(const std::string& model, const std::vector<std::string>& wraps, const std::string& config,
                bool train_mode, bool show_code, const PrepareArgs& prep) {
  qfx::fx::TracerOptions opts;
  if (!config.empty()) opts = qfx::quant::load_tracer_config(config).options;
  for (const auto& w : wraps) opts.wrap.push_back(qfx::fx::WrapSpec::parse(w));
  auto module = qfx::fx::load_torchscript(model);
  module.train(train_mode);
  qfx::fx::QuantizationTracer tracer(opts);
  std::shared_ptr<qfx::fx::GraphModule> gm;
  try {
    gm = tracer.trace(module);
  } catch (const qfx::TraceError& e) {
    throw qfx::TraceError(model + ": " + e.what());
  }
  std::cout << "# " << model << " (traced in " << (train_mode ? "train" : "eval") << " mode)\n";
  if (!tracer.effective_wrap().empty()) {
    std::cout << "# wrap:";
    for (const auto& w : tracer.effective_wrap()) std::cout << " " << w.str();
    std::cout << "\n";
  }
  if (!prep.backend.empty()) {
    auto backend = qfx::quant::BackendConfig::resolve(prep.backend);
    auto mapping = config.empty() ? qfx::quant::QConfigMapping::default_mapping() : qfx::quant::QConfigMapping::load(config);
    auto report = prep.qat ? qfx::quant::prepare_qat_fx(*gm, mapping, backend)
                           : qfx::quant::prepare_fx(*gm, mapping, backend);
    std::cout << "# " << (prep.qat ? "prepare_qat_fx" : "prepare_fx") << " for backend '" << backend.name << "'\n";
    for (const auto& c : report.changes) std::cout << "#   " << c << "\n";
    for (const auto& d : report.declined) std::cout << "#   declined: " << d << "\n";
    const auto fb = qfx::quant::float_fallbacks(*gm);
    std::cout << "# float fallbacks: " << (fb.empty() ? "none" : "") << "\n";
    for (const auto& f : fb) std::cout << "#   " << f << "\n";
  }
  std::cout << "\n";
  gm->print_tabular(std::cout);
  if (show_code) std::cout << "\n" << gm->code();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qfx: quantization toolkit for custom accelerators"};
  app.require_subcommand(1);

  auto* inspect = app.add_subcommand("inspect", "Trace a TorchScript model and print its fx graph and code");
  std::string model, config;
  std::vector<std::string> wraps;
  bool train_mode = false, no_code = false;
  inspect->add_option("model", model, "TorchScript archive (.pt) saved by torch.jit.save")->required();
  inspect->add_option("--wrap", wraps,
                      "Keep a call whole: NAME, method:NAME, function:NAME, module_type:NAME, module:PATH");
  inspect->add_option("--config", config, "YAML config whose tracer section applies (tracer.wrap, ...)");
  inspect->add_flag("--train", train_mode, "Trace in train mode (default: eval)");
  inspect->add_flag("--no-code", no_code, "Print only the table, not the generated code");
  PrepareArgs prep;
  inspect->add_option("--backend", prep.backend,
                      "Also run prepare_fx for this backend (onednn, reference, example_accel or a YAML path); "
                      "the config's qconfig section applies");
  inspect->add_flag("--qat", prep.qat, "With --backend: prepare_qat_fx instead of prepare_fx");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (*inspect) return run_inspect(model, wraps, config, train_mode, !no_code, prep);
  } catch (const qfx::Error& e) {
    std::cerr << "qfx: error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const c10::Error& e) {
    std::cerr << "qfx: error: " << e.what_without_backtrace() << "\n";
    return 8;
  } catch (const std::exception& e) {
    std::cerr << "qfx: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
