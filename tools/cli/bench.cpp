// qfx bench: side-by-side latency of the runtime against libtorch, measured in one run.
#include "bench.h"
#include "bench_timing.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <c10/util/Exception.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "qfx/error.h"
#include "qfx/fx/exported_program.h"
#include "qfx/fx/onnx_model.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/qconfig.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/peak.h"

namespace qfx::cli {
namespace {


// Wall times in milliseconds of each of `fns` over `iters` rounds, after `warmup`
// rounds; each round runs every function once, in turn, so a drift of the machine's
// speed moves all of them alike and their ratios stay comparable.
std::vector<Timing> interleaved_ms(const std::vector<std::function<void()>>& fns, int iters, int warmup = 2) {
  for (int i = 0; i < warmup; ++i)
    for (const auto& fn : fns) fn();
  std::vector<std::vector<double>> t(fns.size());
  for (int i = 0; i < iters; ++i)
    for (size_t f = 0; f < fns.size(); ++f) {
      const auto a = std::chrono::steady_clock::now();
      fns[f]();
      t[f].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    }
  std::vector<Timing> out;
  for (auto& v : t) out.push_back(timing_of(v));
  return out;
}

// Runs `argv` (no shell: arguments are passed as they are) and returns its exit
// status, with its standard output and error together in `*out`. -1 if it could
// not be started.
int run_capture(const std::vector<std::string>& argv, std::string* out) {
  int fd[2];
  if (pipe(fd) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, fd[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&fa, fd[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fd[1]);
  if (rc != 0) {
    close(fd[0]);
    return -1;
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(fd[0], buf, sizeof buf)) > 0) out->append(buf, static_cast<size_t>(n));
  close(fd[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The last non-empty line of `text` (a Python script's error), at most 200 characters.
std::string last_line(const std::string& text) {
  std::string line, last;
  for (size_t s = 0; s <= text.size();) {
    size_t e = text.find('\n', s);
    if (e == std::string::npos) e = text.size();
    line = text.substr(s, e - s);
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
    s = e + 1;
  }
  return last.size() > 200 ? last.substr(0, 197) + "..." : last;
}

// PyTorch's int8 latency at batch `b` in `flow` ("fx": prepare_fx + convert_fx on the
// onednn engine; "pt2e": torch.export + prepare_pt2e / convert_pt2e with the x86
// Inductor quantizer, compiled), measured by the Python script now with $QFX_PYTHON
// (default python3 on PATH); negative if the script failed, with its reason in `*why`.
double pytorch_int8_ms(const BenchArgs& args, const std::string& flow, int64_t b, std::string* why) {
  std::string out;
  const char* py = std::getenv("QFX_PYTHON");
  const int rc = run_capture({py && *py ? py : "python3", args.pytorch_script, args.torchscript, "--arch", args.arch, "--batch",
                              std::to_string(b), "--images", "0", "--res", std::to_string(args.size), "--threads",
                              std::to_string(args.threads), "--flow", flow},
                             &out);
  if (rc != 0) {
    *why = rc < 0 ? "could not start " + std::string(py && *py ? py : "python3") : last_line(out);
    return -1;
  }
  try {
    // The JSON line is the script's last line of standard output.
    const size_t at = out.rfind("\n{") == std::string::npos ? out.find('{') : out.rfind("\n{") + 1;
    const size_t end = out.find('\n', at);
    return nlohmann::json::parse(out.substr(at, end == std::string::npos ? std::string::npos : end - at))
        .at("int8_ms_per_batch")
        .get<double>();
  } catch (const std::exception&) {
    *why = "no timing in its output: " + last_line(out);
    return -1;
  }
}

// The input's [C, H, W]: the ONNX model's static dims, H = W = `requested` when given
// (> 0), 224 where the model leaves them dynamic; C defaults to 3. Throws ConfigError
// for a model whose first input is not 4-D ([N, C, H, W]).
std::array<int64_t, 3> input_chw(const runtime::Model& m, int64_t requested) {
  const auto& shape = m.inputs().at(0).shape;
  if (shape.size() != 4)
    throw ConfigError("qfx bench times models with one [N, C, H, W] input; '" + m.inputs().at(0).name + "' has " +
                      std::to_string(shape.size()) + " dims");
  auto dim = [&](size_t i, int64_t def) { return shape[i] > 0 ? shape[i] : def; };
  if (requested > 0) return {dim(1, 3), requested, requested};
  return {dim(1, 3), dim(2, 224), dim(3, 224)};
}

// Drops libtorch's warnings while it lives (torch 2.x warns that TorchScript is
// deprecated, once per call site, when the baseline is frozen), counting them.
#if TORCH_VERSION_MAJOR >= 2
namespace warning_api = c10::WarningUtils;
#else
namespace warning_api = c10::Warning;  // libtorch 1.13 keeps the handler functions here
#endif
class QuietWarnings : public c10::WarningHandler {
 public:
  QuietWarnings() : previous_(warning_api::get_warning_handler()) { warning_api::set_warning_handler(this); }
  ~QuietWarnings() override { warning_api::set_warning_handler(previous_); }
  QuietWarnings(const QuietWarnings&) = delete;
  QuietWarnings& operator=(const QuietWarnings&) = delete;
#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning&) override { ++count; }
#else
  void process(const c10::SourceLocation&, const std::string&, const bool) override { ++count; }
#endif
  int count = 0;

 private:
  c10::WarningHandler* previous_;
};

// The input channels of the first 4-D weight among `params` (3 without one).
template <typename Params>
int64_t first_conv_channels(const Params& params) {
  for (const auto& p : params)
    if (p.dim() == 4) return p.size(1);
  return 3;
}

// The libtorch side of the benchmark, for any model qfx ptq takes: a TorchScript file
// frozen for inference (optimize_for_inference); a torch.export program or a float
// ONNX model as the fx graph qfx ptq reads from it, run in libtorch (eval mode).
struct Baseline {
  std::function<void(const at::Tensor&)> run;
  std::string what;       ///< how the libtorch side runs, for the header line
  int64_t channels = 3;   ///< the first 4-D weight's input channels (for an exported fp32 model)
};

Baseline torchscript_baseline(const std::string& path) {
  auto ts = qfx::fx::load_torchscript(path);
  ts.eval();
  auto frozen = std::make_shared<torch::jit::Module>(torch::jit::optimize_for_inference(ts));
  return {[frozen](const at::Tensor& x) { frozen->forward({x}); }, "frozen TorchScript", first_conv_channels(ts.parameters())};
}

// `chw`: the input's channels, height and width (for an ONNX model's dynamic dims).
Baseline graph_baseline(const std::string& path, const std::array<int64_t, 3>& chw) {
  fx::TracerOptions to;
  if (fx::is_onnx_model(path)) to.input_shapes = {{-1, chw[0], chw[1], chw[2]}};
  std::shared_ptr<fx::GraphModule> gm = fx::trace_file(path, to);
  gm->eval();
  const std::string kind = fx::is_onnx_model(path) ? "the ONNX model's" : "the torch.export program's";
  return {[gm](const at::Tensor& x) { gm->forward(x); }, kind + " fx graph in libtorch", first_conv_channels(gm->parameters())};
}

// An ONNX model's input [C, H, W] as declared; `size` > 0 sets H and W, else dynamic
// ones are 224. ConfigError for an input that is not [N, C, H, W].
std::array<int64_t, 3> onnx_chw(const std::string& path, int64_t size) {
  const auto inputs = fx::onnx_model_inputs(path);
  if (inputs.empty() || inputs[0].shape.size() != 4)
    throw ConfigError("qfx bench times models with one [N, C, H, W] input; " + path + " declares another");
  const auto& s = inputs[0].shape;
  auto hw = [&](int64_t d) { return size > 0 ? size : (d > 0 ? d : 224); };
  return {s[1] > 0 ? s[1] : 3, hw(s[2]), hw(s[3])};
}

// The fp32 model of model file `pt` as `qfx ptq` builds it (traced, batch norm
// folded, the default qconfig's observers as pass-throughs), as ONNX bytes, for an
// input [N, C, H, W] (`chw`).
std::string export_fp32(const std::string& pt, const std::array<int64_t, 3>& chw) {
  fx::TracerOptions to;
  to.input_shapes = {{-1, chw[0], chw[1], chw[2]}};
  auto gm = fx::trace_file(pt, to);
  quant::prepare_fx(*gm, quant::QConfigMapping::default_mapping(), quant::BackendConfig::resolve("onednn"));
  quant::ExportOptions eo;
  eo.float_model = true;
  eo.input_shapes = to.input_shapes;
  eo.input_names = {"input"};
  return quant::export_onnx_bytes(*gm, eo, nullptr);
}

// The values a qfx ptq encodings.json quantizes (those its calibration observed):
// their names and fx nodes into args->observed; nothing when the file is absent (a qat folder). IoError for
// a file that is not valid JSON.
void read_observed(const std::filesystem::path& encodings, BenchArgs* args) {
  std::ifstream in(encodings);
  if (!in) return;
  nlohmann::json e;
  try {
    e = nlohmann::json::parse(in);
  } catch (const std::exception& ex) {
    throw IoError(encodings.string() + ": not valid JSON (" + ex.what() + ")");
  }
  if (!e.contains("activations") || !e["activations"].is_object()) return;
  for (const auto& kv : e["activations"].items()) {
    args->observed.push_back(kv.key());  // a graph input keeps its name
    if (kv.value().contains("node") && kv.value()["node"].is_string()) args->observed.push_back(kv.value()["node"].get<std::string>());
  }
}

// What the taps column taps: the model's inputs and computed float values, or of
// those the outputs of the fx nodes calibration observed (`observed`; qfx's ONNX names
// the output of node N "N_<index>", graph inputs keep their names).
std::vector<std::string> tap_names(const runtime::Model& m, const std::vector<std::string>& observed) {
  std::vector<std::string> names;
  for (const auto& in : m.inputs()) names.push_back(in.name);
  for (const auto& n : m.value_names()) names.push_back(n);
  if (observed.empty()) return names;
  const std::set<std::string> nodes(observed.begin(), observed.end());
  auto node_of = [](const std::string& v) {
    const size_t u = v.rfind('_');
    if (u == std::string::npos || u + 1 == v.size()) return v;
    for (size_t i = u + 1; i < v.size(); ++i)
      if (v[i] < '0' || v[i] > '9') return v;
    return v.substr(0, u);
  };
  names.erase(std::remove_if(names.begin(), names.end(),
                             [&](const std::string& n) { return !nodes.count(n) && !nodes.count(node_of(n)); }),
              names.end());
  return names;
}

// What `qfx bench MODEL [ONNX]` times: MODEL is a folder that qfx ptq / qat wrote
// (report.json's model, model_fp32.onnx and model_int8.onnx in it) or a model file
// qfx ptq takes (TorchScript, torch.export .pt2, float ONNX), with its ONNX or alone. Fills `args` and returns a note on where
// each side came from. Throws IoError / ConfigError naming what is missing.
std::string resolve_models(BenchArgs* args) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(args->torchscript)) return "";
  const fs::path dir = args->torchscript;
  const fs::path report = dir / "report.json";
  std::ifstream in(report);
  if (!in)
    throw IoError(report.string() + ": not found; qfx bench takes a qfx ptq / qat output folder or a model file (TorchScript, "
                  "torch.export .pt2, float ONNX)");
  nlohmann::json r;
  try {
    r = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw IoError(report.string() + ": not valid JSON (" + e.what() + ")");
  }
  if (!r.contains("model") || !r["model"].is_string()) throw IoError(report.string() + ": no 'model' entry");
  args->torchscript = r["model"].get<std::string>();
  if (!fs::exists(args->torchscript))
    throw IoError(args->torchscript + ": the model that " + report.string() +
                  " names is not found; give it as qfx bench MODEL.pt " + (dir / "model_fp32.onnx").string() + " --int8 " +
                  (dir / "model_int8.onnx").string());
  if (args->onnx.empty() && fs::exists(dir / "model_fp32.onnx")) args->onnx = (dir / "model_fp32.onnx").string();
  if (args->int8_onnx.empty() && fs::exists(dir / "model_int8.onnx")) args->int8_onnx = (dir / "model_int8.onnx").string();
  read_observed(dir / "encodings.json", args);
  return "from " + dir.string();
}

// "123.4 (56 %)": a rate and, when the peak is known, its fraction of it.
std::string rate_str(double rate, double peak) {
  char buf[64];
  if (peak > 0) std::snprintf(buf, sizeof buf, "%.0f (%.0f %%)", rate, 100.0 * rate / peak);
  else std::snprintf(buf, sizeof buf, "%.0f", rate);
  return buf;
}

// runtime::measure_peak, printed as the benchmark's first line.
runtime::Peak measured_peak() {
  const runtime::Peak peak = runtime::measure_peak();
  std::printf("# peak of this machine, %d threads, oneDNN matmul %lld^3: fp32 %.0f GFLOP/s (%s), int8 u8 x s8 %.0f GOP/s (%s); "
              "memory read %.1f GB/s\n",
              peak.threads, static_cast<long long>(peak.size), peak.fp32_gflops, peak.fp32_impl.c_str(), peak.int8_gops,
              peak.int8_impl.c_str(), peak.read_gbps);
  return peak;
}

// Float values the taps of `tapped` read per image of batch `x`: their statistics
// count what they saw in one run.
int64_t tapped_values_per_image(runtime::Model& tapped, const runtime::Tensor& x) {
  tapped.reset_taps();
  tapped.run({{tapped.inputs()[0].name, x}});
  int64_t n = 0;
  for (const auto& [name, st] : tapped.taps()) n += st.count;
  return n / x.shape()[0];
}

// The line under the fp32 table: what the taps read per image and, with the measured
// `peak`, how long reading that from memory takes (a floor under their cost where the
// tensors are larger than the caches).
void print_tap_reads(int64_t per_image, const runtime::Peak* peak) {
  const double mb = 4.0 * static_cast<double>(per_image) / 1e6;
  std::printf("# the taps read %.2f M float values (%.1f MB) per image", static_cast<double>(per_image) / 1e6, mb);
  if (peak) std::printf("; reading them from memory at %.1f GB/s alone takes %.2f ms per image", peak->read_gbps, mb / peak->read_gbps);
  std::printf("\n");
}

// One row of the int8 table at batch `b`: qfx int8 (`t_int8` ms, against qfx fp32's
// `t_fp32`, at `rate`), then each PyTorch flow's time and qfx's ratio to it; a flow
// that could not be measured prints "failed" and its reason goes to `failures`.
std::string int8_row(const BenchArgs& args, int64_t b, double t_int8, double t_fp32, const std::string& rate,
                     std::vector<std::string>* failures) {
  char row[128];
  std::snprintf(row, sizeof row, "%-6lld %14.2f %14.2f %18s", static_cast<long long>(b), t_int8, t_int8 / t_fp32, rate.c_str());
  std::string line = row;
  for (const auto& flow : args.pytorch_script.empty() ? std::vector<std::string>{} : args.pytorch_flows) {
    std::string why;
    const double t_pt = pytorch_int8_ms(args, flow, b, &why);
    char pt[32] = "failed", vs_pt[32] = "-";  // the reason is printed below the table
    if (t_pt <= 0) failures->push_back("PyTorch " + flow + " at batch " + std::to_string(b) + ": " + why);
    if (t_pt > 0) {
      std::snprintf(pt, sizeof pt, "%.2f", t_pt);
      std::snprintf(vs_pt, sizeof vs_pt, "%.2f", t_int8 / t_pt);
    }
    std::snprintf(row, sizeof row, " %16s %14s", pt, vs_pt);
    line += row;
  }
  return line;
}

}  // namespace

int run_bench(const BenchArgs& a) {
  BenchArgs args = a;
  if (args.threads > 0) at::set_num_threads(args.threads);
  args.threads = at::get_num_threads();
  torch::NoGradGuard ng;
  const runtime::Peak peak = args.peak ? measured_peak() : runtime::Peak{};
  if (args.torchscript.empty()) {
    if (args.peak) return 0;
    throw ConfigError("qfx bench needs a model: a qfx ptq / qat output folder, or a TorchScript file (and its ONNX), or --peak alone");
  }
  const std::string source = resolve_models(&args);
  QuietWarnings quiet;
  const bool script = !fx::is_exported_program(args.torchscript) && !fx::is_onnx_model(args.torchscript);
  std::optional<Baseline> base;
  if (script) base = torchscript_baseline(args.torchscript);
  std::string fp32_bytes;
  if (args.onnx.empty()) {  // a model file alone: its fp32 graph exported as qfx ptq builds it
    const int64_t size = args.size > 0 ? args.size : 224;
    std::array<int64_t, 3> chw = {base ? base->channels : 3, size, size};
    if (fx::is_onnx_model(args.torchscript)) chw = onnx_chw(args.torchscript, args.size);
    if (!base) base = graph_baseline(args.torchscript, chw);
    if (!fx::is_onnx_model(args.torchscript)) chw[0] = base->channels;
    fp32_bytes = export_fp32(args.torchscript, chw);
  }
  auto load_fp32 = [&](const runtime::ModelOptions& o) {
    return fp32_bytes.empty() ? runtime::Model::load(args.onnx, o) : runtime::Model::load_from_string(fp32_bytes, o);
  };
  runtime::Model model = load_fp32({"onednn"});
  if (!base) base = graph_baseline(args.torchscript, input_chw(model, args.size));
  runtime::ModelOptions unfused{"onednn"};  // every value of the graph, fused or not, to choose the taps from
  unfused.fuse_activations = false;
  const std::vector<std::string> names = tap_names(load_fp32(unfused), args.observed);
  // The tapped model as calibration loads it: the tapped values kept unfused, in any layout.
  runtime::ModelOptions tap_options{"onednn"};
  tap_options.keep_values = names;
  tap_options.keep_values_any_layout = true;
  runtime::Model tapped = load_fp32(tap_options);
  const std::array<int64_t, 3> chw = input_chw(model, args.size);
  args.size = chw[1];
  std::printf("# taps: %zu %s, each with calibration's histogram (2048 bins, growing)\n", names.size(),
              args.observed.empty() ? "float values (every one the model computes)"
                                    : "values calibration observed (the folder's encodings.json)");
  const std::string fp32_name = fp32_bytes.empty() ? args.onnx : "its fp32 model exported as qfx ptq builds it";
  std::printf("# %s vs %s (%s)%s, input [N, %lld, %lld, %lld], %d threads, median of %d interleaved runs (ms)\n",
              fp32_name.c_str(), args.torchscript.c_str(), base->what.c_str(), source.empty() ? "" : (" (" + source + ")").c_str(), static_cast<long long>(chw[0]), static_cast<long long>(chw[1]),
              static_cast<long long>(chw[2]), args.threads, args.iters);
  std::printf("%-6s %14s %14s %10s %16s %12s %18s\n", "batch", "libtorch fp32", "qfx fp32", "qfx/torch", "qfx fp32 + taps",
              "taps/plain", "qfx GFLOP/s");
  std::unique_ptr<runtime::Model> int8;
  if (!args.int8_onnx.empty()) int8 = std::make_unique<runtime::Model>(runtime::Model::load(args.int8_onnx, {"onednn"}));
  std::vector<std::string> int8_rows, pytorch_failures;
  std::vector<Timing> all_sides;  // every side's timings, for the noise warning
  int64_t tapped_per_image = 0;   // float values the taps read per image
  for (int64_t b : args.batches) {
    std::mt19937 rng(0);
    std::normal_distribution<float> nd;
    runtime::Tensor x({b, chw[0], chw[1], chw[2]}, runtime::DType::kFloat32);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = nd(rng);
    at::Tensor xt = torch::from_blob(x.raw(), {b, chw[0], chw[1], chw[2]}, torch::kFloat).clone();
    // Calibration's statistic: the growing 2048-bin lattice histogram (stats::Histogram,
    // what its HistogramObservers count with).
    tapped.set_taps(names, runtime::TapKind::kHistogram, runtime::TapOptions{2048});
    std::vector<std::function<void()>> fns = {[&] { base->run(xt); },
                                              [&] { model.run({{model.inputs()[0].name, x}}); },
                                              [&] { tapped.run({{tapped.inputs()[0].name, x}}); }};
    if (int8) fns.push_back([&] { int8->run({{int8->inputs()[0].name, x}}); });
    const std::vector<Timing> timing = interleaved_ms(fns, args.iters);
    all_sides.insert(all_sides.end(), timing.begin(), timing.end());
    const double t_torch = timing[0].median, t_qfx = timing[1].median, t_taps = timing[2].median;
    if (tapped_per_image == 0) tapped_per_image = tapped_values_per_image(tapped, x);
    // GFLOP/s: 2 operations per multiply-accumulate, t in ms.
    const double ops = 2.0 * static_cast<double>(model.multiply_accumulates({x.shape()}));
    std::printf("%-6lld %14.2f %14.2f %10.2f %16.2f %12.2f %18s\n", static_cast<long long>(b), t_torch, t_qfx,
                t_qfx / t_torch, t_taps, t_taps / t_qfx, rate_str(ops / t_qfx / 1e6, peak.fp32_gflops).c_str());
    if (int8) {
      const double ops8 = 2.0 * static_cast<double>(int8->multiply_accumulates({x.shape()}));
      int8_rows.push_back(int8_row(args, b, timing[3].median, t_qfx, rate_str(ops8 / timing[3].median / 1e6, peak.int8_gops),
                                   &pytorch_failures));
    }
  }
  print_tap_reads(tapped_per_image, args.peak ? &peak : nullptr);
  if (int8) {
    std::printf("# int8: %s (runtime onednn)%s\n", args.int8_onnx.c_str(),
                args.pytorch_script.empty() ? "; no PyTorch columns (--pytorch-int8 SCRIPT adds them)"
                                            : "; PyTorch fx: prepare_fx + convert_fx, onednn engine; PyTorch pt2e: "
                                              "prepare_pt2e + convert_pt2e (X86InductorQuantizer), torch.compile");
    std::printf("%-6s %14s %14s %18s", "batch", "qfx int8", "int8/fp32", "qfx GOP/s");
    for (const auto& flow : args.pytorch_script.empty() ? std::vector<std::string>{} : args.pytorch_flows)
      std::printf(" %16s %14s", ("PyTorch " + flow).c_str(), ("qfx/" + flow).c_str());
    std::printf("\n");
    for (const auto& r : int8_rows) std::printf("%s\n", r.c_str());
    for (const auto& f : pytorch_failures) std::printf("# no %s\n", f.c_str());
  } else {
    std::printf("# no int8 rows: give the int8 model (--int8 MODEL_INT8.onnx, or a qfx ptq output folder as MODEL)\n");
  }
  std::printf("# qfx/torch < 1: the runtime is faster than the libtorch side; GFLOP/s and GOP/s count\n"
              "# 2 operations per multiply-accumulate of the model's convolutions and matrix products%s\n",
              args.peak ? " (in brackets: the fraction of the peak above)" : "");
  if (quiet.count > 0) std::printf("# %d libtorch warnings were not shown\n", quiet.count);
  double noisiest = 0;
  if (timings_disagree(all_sides, args.iters, &noisiest))
    std::fprintf(stderr,
                 "qfx bench: warning: repeated timings disagree (interquartile range up to %.0f %% of the median); the machine "
                 "is probably doing something else: ratios may be off; use more --iters or an idle machine\n",
                 100 * noisiest);
  return 0;
}

}  // namespace qfx::cli
