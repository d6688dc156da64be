// Internal: what the PTQ and QAT pipelines share: staged output files, JSON,
// tensor bridges, progress through the hooks, and the one-input convert.
#pragma once

#include <ATen/ATen.h>
#include <torch/version.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "qfx/atomic_file.h"
#include "qfx/cleanup.h"
#include "qfx/error.h"
#include "qfx/quant/convert.h"
#include "qfx/runtime/arithmetic.h"
#include "observer_report.h"
#include "range_advice.h"
#include "qfx/quant/pipeline.h"
#include "qfx/quant/report.h"
#include "qfx/quant/runtime_tensor.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/registry.h"
#include "qfx/version.h"

namespace qfx::quant::pipeline {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
inline double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

/// The output folder is committed in one step: files are written into a staging
/// folder beside it (".<name>.qfx-staging-<pid>", beside the folder a symbolic link
/// points to); `commit()` links the files the output folder already holds that this
/// run does not write (a QAT checkpoint, the user's own files; symbolic links stay
/// links) into the staging folder, then swaps the two folders with one atomic rename
/// (renameat2 RENAME_EXCHANGE) and removes the old one. A folder that cannot be
/// swapped (a mount point, the current folder or one above it, a folder whose
/// parent is read-only or where the file system lacks the exchange) is staged
/// inside itself (".qfx-staging-<pid>") and its files are renamed into place one by
/// one, each atomically. Destroyed before commit (a failure), the staging folder is
/// removed: the output folder never holds a file of a failed run. Throws IoError
/// (naming the folder) when the folder cannot be created or written. `commit()`
/// is a fault injection point (testing::FaultPoint::kBeforeCommit).
class Staging {
 public:
  explicit Staging(const std::string& dir);
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  /// Where to write output file `name` now.
  std::string path(const std::string& name) const { return (staging_ / name).string(); }
  /// Makes every file written so far visible in the output folder at once. Throws IoError.
  void commit();
  /// Where output file `name` will be after commit.
  std::string final_path(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  /// Why the files are committed one by one ("a mount point", ...), empty when the
  /// folder is swapped atomically.
  const std::string& in_place_reason() const { return in_place_reason_; }

 private:
  std::string dir_;
  fs::path staging_;
  fs::path real_;             // dir_ with symbolic links resolved: the folder replaced
  bool in_place_ = false;     // staged inside real_, committed file by file
  std::string in_place_reason_;
  bool committed_ = false;
  bool created_dir_ = false;  // the output folder did not exist: removed again if nothing is committed
  int cleanup_staging_ = 0, cleanup_dir_ = 0;  // qfx::Cleanup ids (removed on SIGINT / SIGTERM)
};

inline void write_json(const std::string& path, const nlohmann::json& j) { write_file_atomic(path, j.dump(2) + "\n"); }

/// Opens the output folder `dir` into `*out` and says (through `h`) when its files
/// will be replaced one by one rather than swapped in at once (Staging).
inline void open_output(std::optional<Staging>* out, const std::string& dir, const PipelineHooks& h) {
  out->emplace(dir);
  if (!(*out)->in_place_reason().empty())
    if (h.info) h.info("output folder " + dir + " is " + (*out)->in_place_reason() + ": its files are replaced one by one");
}

/// Stages report.json (with the observers' statistics, the ranges that waste codes
/// (range_advice) and weight ranges of `prepared`, and `seconds`) and, when `html`,
/// report.html drawn from it. Each range finding is also one `hooks.info` line.
inline void write_reports(const Staging& out, nlohmann::json& report, const fx::GraphModule& prepared, bool html,
                          double seconds, const PipelineHooks& hooks) {
  report["observers"] = detail::observer_statistics(prepared);
  report["range_advice"] = detail::range_advice(report["observers"]);
  for (const auto& a : report["range_advice"])
    if (hooks.info) hooks.info("range of " + a["node"].get<std::string>() + ": " + a["detail"].get<std::string>() + "; try " +
                    a["fix"].get<std::string>());
  report["weights"] = detail::weight_ranges(prepared);
  report["seconds"] = seconds;
  write_json(out.path("report.json"), report);
  if (html) write_file_atomic(out.path("report.html"), render_report_html(report.dump(), out.final_path("report.json")));
}

/// A runtime tensor over an ATen tensor's memory (no copy).
inline runtime::Tensor wrap(const at::Tensor& t) { return runtime_view(t); }
/// One batch as the runtime takes it: `batch[i]` (a view) under the name of the
/// model's input i. Throws DataError when the counts differ.
inline std::map<std::string, runtime::Tensor> feed(const runtime::Model& m, const std::vector<at::Tensor>& batch) {
  const auto& ins = m.inputs();
  if (ins.size() != batch.size())
    throw DataError("a batch of " + std::to_string(batch.size()) + " tensor(s) for a model with " + std::to_string(ins.size()) +
                    " input(s)");
  std::map<std::string, runtime::Tensor> in;
  for (size_t i = 0; i < batch.size(); ++i) in.emplace(ins[i].name, runtime_view(batch[i]));
  return in;
}
/// A float runtime tensor copied into ATen.
inline at::Tensor to_aten(const runtime::Tensor& t) { return aten_view(t).clone(); }

/// Progress through the hooks.
inline void progress(const PipelineHooks& h, const std::string& stage, int64_t done, int64_t total,
                     const std::string& extra = "") {
  if (h.progress) h.progress(stage, done, total, extra);
}
inline void info(const PipelineHooks& h, const std::string& line) {
  if (h.info) h.info(line);
}

/// The graph inputs' names, shapes and element types of a job's exports (model.inputs).
inline void set_inputs(ExportOptions* o, const std::vector<InputSpec>& inputs) {
  for (const InputSpec& in : inputs) {
    o->input_names.push_back(in.name);
    o->input_shapes.push_back(in.shape);
    o->input_dtypes.push_back(in.dtype);
  }
}

/// convert_fx, then export_onnx (ONNX opset 14) of the converted model: the graph
/// inputs named, shaped and typed as `inputs` (model.inputs), the output "output".
/// `converted` receives the converted GraphModule. A target arithmetic other than
/// ONNX's goes into the model's metadata; `matmul_nbits`: ExportOptions::matmul_nbits.
inline ExportResult convert_model(fx::GraphModule& gm, const std::string& path, const std::vector<InputSpec>& inputs,
                                  std::shared_ptr<fx::GraphModule>* converted, const runtime::Arithmetic& arithmetic,
                                  bool matmul_nbits = false, int accuracy_level = 1) {
  *converted = convert_fx(gm);
  ExportOptions o;
  o.matmul_nbits = matmul_nbits;
  o.matmul_nbits_accuracy_level = accuracy_level;
  set_inputs(&o, inputs);
  o.opset = 14;  // HardSwish is an op (a target's lookup table) from opset 14
  if (!arithmetic.is_float()) o.metadata[runtime::kArithmeticMetadataKey] = arithmetic.to_json();
  return export_onnx(**converted, path, o);
}

/// The name of output `index` of a model exported by convert_model ("output", or
/// "output_K" when there are several). Throws ConfigError naming `config` and
/// evaluation.output if the model has fewer outputs.
inline std::string output_name(const runtime::Model& m, int64_t index, const std::string& config) {
  const auto outs = m.outputs();
  if (index < 0 || index >= static_cast<int64_t>(outs.size()))
    throw ConfigError(config + ": evaluation.output " + std::to_string(index) + ": the model has " +
                      std::to_string(outs.size()) + " output(s) (0-based index)");
  return outs[static_cast<size_t>(index)].name;
}

/// Output `index` of `gm`'s forward on the inputs `x` (a tuple or list output is
/// indexed; a single tensor is output 0). Throws DataError if it is not a tensor.
inline at::Tensor forward_output(fx::GraphModule& gm, const std::vector<at::Tensor>& x, int64_t index) {
  c10::IValue v = gm.forward(std::vector<c10::IValue>(x.begin(), x.end()));
  if (v.isTensor() && index == 0) return v.toTensor();
  std::vector<c10::IValue> items;
  if (v.isTuple()) items = v.toTupleRef().elements().vec();
  else if (v.isList()) items = v.toListRef().vec();
  if (index < static_cast<int64_t>(items.size()) && items[static_cast<size_t>(index)].isTensor())
    return items[static_cast<size_t>(index)].toTensor();
  throw DataError("the model's output " + std::to_string(index) + " is not a tensor (evaluation.output)");
}

/// Fills what a PtqResult and a QatResult say about their inputs.
template <typename Result>
void set_inputs(Result* r, const JobConfig& cfg, const std::string& backend, const std::string& runtime_backend) {
  r->model = cfg.model.path;
  r->config = cfg.path;
  r->backend = backend;
  r->runtime_backend = runtime_backend;
  r->output_dir = cfg.output.dir;
}

/// The kernel report as JSON: [{node, op, impl, declined: [{impl, reason}]}].
inline nlohmann::json kernel_report_json(const std::vector<runtime::KernelChoice>& r) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : r) {
    if (c.folded) continue;
    nlohmann::json d = nlohmann::json::array();
    for (const auto& x : c.declined) d.push_back({{"impl", x.impl}, {"reason", x.reason}});
    out.push_back({{"node", c.node}, {"op", c.op}, {"impl", c.impl}, {"dtype", c.dtype}, {"declined", d},
                   {"inputs", c.inputs}, {"outputs", c.outputs}});
  }
  return out;
}

/// Says when a data section has fewer samples than its num_samples asks for (the
/// reader then takes them all): "calibration.num_samples is 1000, the data holds 64:
/// using 64". Throws DataError ("evaluation saw no samples: ...") when it holds none.
inline void note_fewer_samples(const PipelineHooks& h, const std::string& key, int64_t requested, int64_t got) {
  if (got == 0) {  // calibration, evaluation or training on nothing: say so before any work
    const std::string section = key.substr(0, key.find('.'));
    throw DataError(section + " saw no samples: " + section + ".data holds none (an empty .npy, folder or IDX file)");
  }
  if (requested > 0 && got < requested)
    info(h, key + " is " + std::to_string(requested) + ", the data holds " + std::to_string(got) + ": using " +
                std::to_string(got));
}

/// What made the outputs: {"qfx": "0.1.0", "libtorch": "2.15.0", "onednn": "2.6.3"}
/// (libtorch as compiled against, the runtime's libraries as loaded).
inline nlohmann::json versions_json() {
  nlohmann::json v = {{"qfx", qfx::version()}, {"libtorch", TORCH_VERSION}};
  for (const auto& [name, version] : runtime::library_versions()) v[name] = version;
  return v;
}

}  // namespace qfx::quant::pipeline
