// The `qfx` command-line tool.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "bench.h"
#include "common.h"
#include "launch.h"
#include "ops.h"
#include "parse_error.h"
#include "run.h"
#include "signals.h"
#include "threads.h"
#include "ptq.h"
#include "qat.h"
#include "qfx/error.h"
#include "qfx/fx/op_libraries.h"
#include "qfx/fx/exported_program.h"
#include "qfx/fx/onnx_model.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/config.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/pipeline.h"
#include "qfx/quant/job_config.h"
#include "qfx/quant/report.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/registry.h"
#include "qfx/version.h"
#include <torch/version.h>

namespace {

struct PrepareArgs {
  std::string backend;  // empty: print the traced graph only
  bool qat = false;
  std::vector<int64_t> input_shape;  // --input-shape=-1,16,32: shape specialisation (TracerOptions::input_shapes)
};


int run_inspect(const std::string& model, const std::vector<std::string>& wraps, const std::string& config,
                bool train_mode, bool show_code, const PrepareArgs& prep) {
  qfx::fx::TracerOptions opts;
  if (!config.empty()) opts = qfx::quant::load_tracer_config(config).options;
  for (const auto& w : wraps) opts.wrap.push_back(qfx::fx::WrapSpec::parse(w));
  if (!prep.input_shape.empty()) opts.input_shapes = {prep.input_shape};
  qfx::fx::QuantizationTracer tracer(opts);
  std::shared_ptr<qfx::fx::GraphModule> gm;
  if (qfx::fx::is_exported_program(model)) {  // torch.export: the program is the graph
    gm = qfx::fx::load_exported_program(model);
    gm->train(train_mode);
    std::cout << "# " << model << " (torch.export program, " << (train_mode ? "train" : "eval") << " mode)\n";
  } else if (qfx::fx::is_onnx_model(model)) {  // ONNX: read into the same graph
    qfx::fx::OnnxModelOptions o;
    o.input_shapes = opts.input_shapes;
    gm = qfx::fx::load_onnx_model(model, o);
    gm->train(train_mode);
    std::cout << "# " << model << " (ONNX model, " << (train_mode ? "train" : "eval") << " mode)\n";
  } else {
    auto module = qfx::fx::load_torchscript(model);
    module.train(train_mode);
    try {
      gm = tracer.trace(module);
    } catch (const qfx::TraceError& e) {
      throw qfx::TraceError(model + ": " + e.what());
    }
    std::cout << "# " << model << " (traced in " << (train_mode ? "train" : "eval") << " mode)\n";
  }
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
  qfx::cli::wait_passively_on_busy_machine(argv);
  qfx::cli::install_signal_cleanup();
  CLI::App app{"qfx: quantization toolkit for custom accelerators"};
  app.require_subcommand(1);
  std::string versions = std::string("qfx ") + qfx::version() + " (libtorch " + TORCH_VERSION;
  for (const auto& [name, v] : qfx::runtime::library_versions()) versions += ", " + name + " " + v;
  app.set_version_flag("--version", versions + ")", "Print qfx's version and those of the libraries it runs on");

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
  inspect->add_option("--input-shape", prep.input_shape,
                      "Input shape, -1 for a dynamic dimension (--input-shape=-1,16,32): shape queries that do not "
                      "depend on it fold at trace time")
      ->delimiter(',');

  qfx::cli::RunArgs rargs;
  auto* run = qfx::cli::add_run_command(app, rargs);

  auto* bench = app.add_subcommand("bench", "Latency of the runtime against libtorch, side by side in one run");
  qfx::cli::BenchArgs bargs;
  bench->add_option("model", bargs.torchscript,
                    "A qfx ptq / qat output folder (its model, model_fp32.onnx and model_int8.onnx), or a model file as qfx "
                    "ptq takes it: TorchScript, torch.export .pt2 or float ONNX (the libtorch baseline); optional with --peak");
  bench->add_option("onnx", bargs.onnx,
                    "The same model as ONNX for the qfx runtime (default: from the folder, the float ONNX model itself, or "
                    "exported from the TorchScript / .pt2 model as qfx ptq builds it)");
  bench->add_flag("--peak", bargs.peak,
                  "Measure this machine's fp32 and int8 peak (large oneDNN matmuls) and report each line's fraction of it");
  bench->add_option("--batch", bargs.batches, "Batch sizes (default 1 32)")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  bench->add_option("--size", bargs.size, "Input height and width (default: the ONNX model's static input size, else 224)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  bench->add_option("--iters", bargs.iters, "Timed runs per measurement (default 10)")->check(CLI::Range(1, 1000000));
  bench->add_option("--threads", bargs.threads,
                    "Threads of both sides (default: every CPU this process may use, or OMP_NUM_THREADS)");
  bench->add_option("--int8", bargs.int8_onnx, "The int8 QDQ model (from qfx ptq): adds int8 rows");
  bench->add_option("--pytorch-int8", bargs.pytorch_script,
                    "tools/bench/pytorch_calibration.py: also time PyTorch's FX int8 model in the same run");
  bench->add_option("--arch", bargs.arch, "torchvision architecture, for --pytorch-int8 (default resnet18)");
  bench->add_option("--pytorch-flow", bargs.pytorch_flows, "PyTorch int8 flows to time with --pytorch-int8: fx, pt2e (default fx)")
      ->check(CLI::IsMember({"fx", "pt2e"}));

  auto* ptq = app.add_subcommand("ptq", "Post-training quantization from a YAML config (default: configs/ptq/default.yaml)");
  std::string ptq_config;  // default: ptq/default.yaml among quant::config_dirs()
  std::vector<std::string> ptq_set;
  ptq->add_option("config", ptq_config, "PTQ config (YAML); default: the shipped configs/ptq/default.yaml");
  ptq->add_option("--set", ptq_set, "Override a config key: calibration.num_samples=64 (repeatable)");
  int nproc = 1;
  std::vector<std::string> libraries;  // --library: operator libraries, loaded before the model
  for (auto* sub : {inspect, ptq}) sub->add_option("--library", libraries, "Operator library (.so) the model's TorchScript calls (repeatable; torchvision's loads by itself)");
  ptq->add_option("--nproc", nproc, "Data-parallel calibration on N local processes (c10d Gloo; torchrun's environment also works)")
      ->check(CLI::Range(1, 1024));

  auto* qat = app.add_subcommand("qat", "Quantization-aware training from a YAML config (default: configs/qat/fashion_mobilenet.yaml)");
  std::string qat_config;  // default: qat/fashion_mobilenet.yaml among quant::config_dirs()
  std::vector<std::string> qat_set;
  qat->add_option("config", qat_config, "QAT config (YAML): the PTQ keys plus training:");
  qat->add_option("--set", qat_set, "Override a config key: training.epochs=1 (repeatable)");
  qat->add_option("--library", libraries, "Operator library (.so) the model's TorchScript calls (repeatable)");
  qat->add_option("--nproc", nproc, "Data-parallel training on N local processes, training.batch_size each (c10d Gloo)")
      ->check(CLI::Range(1, 1024));

  auto* ops = app.add_subcommand("ops", "List the ops qfx knows (the op catalog) and, with --backend, what a target gives each");
  std::string ops_backend;
  ops->add_option("--backend", ops_backend, "A backend name (onednn, ...) or YAML file: add its category for each op");

  auto* report = app.add_subcommand("report",
                                    "Write report.html again from a qfx ptq / qat output folder's report.json; with several "
                                    "folders, compare the runs side by side");
  std::vector<std::string> report_dirs;
  std::string compare_html = "report_comparison.html";
  report->add_option("dirs", report_dirs, "Output folders (each holds report.json)")->required()->expected(1, -1);
  report->add_option("-o,--output", compare_html, "With several folders: the comparison page to write")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return qfx::cli::report_parse_error(app, argc, argv, e);
  }

  try {
    qfx::cli::set_default_threads();
    for (const auto& lib : libraries) qfx::fx::load_operator_library(lib);
    if (*inspect) return run_inspect(model, wraps, config, train_mode, !no_code, prep);
    if (*run) return qfx::cli::run_model(rargs);
    if (*ops) return qfx::cli::print_ops(ops_backend);
    if (*bench) return qfx::cli::run_bench(bargs);
    if (*report) {
      if (report_dirs.size() == 1) {
        std::cout << "wrote " << qfx::quant::write_report_html(report_dirs[0]) << "\n";
      } else {
        std::cout << qfx::quant::compare_reports(report_dirs, compare_html) << "wrote " << compare_html << "\n";
      }
      return 0;
    }
    const char* world = std::getenv("WORLD_SIZE");
    if (*ptq && ptq_config.empty()) ptq_config = qfx::quant::find_config("ptq/default.yaml");
    if (*qat && qat_config.empty()) qat_config = qfx::quant::find_config("qat/fashion_mobilenet.yaml");
    if ((*ptq || *qat) && nproc > 1 && !(world && *world)) {
      // Refused before any process starts: a job that cannot give every process work.
      const bool training = static_cast<bool>(*qat);
      qfx::quant::check_world_size(qfx::quant::load_job_config(training ? qat_config : ptq_config, training ? qat_set : ptq_set),
                                   nproc, training);
      return qfx::cli::launch_local(nproc, argc, argv);
    }
    if (*ptq) return qfx::cli::run_ptq(ptq_config, ptq_set);
    if (*qat) return qfx::cli::run_qat(qat_config, qat_set);
  } catch (const c10::Error& e) {  // libtorch raised it outside a graph node (loading, shapes)
    std::cerr << "qfx " << app.get_subcommands().at(0)->get_name() << ": libtorch error: "
              << qfx::cli::clip_message(e.what_without_backtrace()) << "\n";
    return 8;
  } catch (...) {
    return qfx::cli::report_exception(app.get_subcommands().at(0)->get_name(),
                                      "an input, a batch or a model larger than this machine's memory; "
                                      "try a smaller batch_size or num_samples");
  }
  return 0;
}
