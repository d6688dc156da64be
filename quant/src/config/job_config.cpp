#include "qfx/quant/job_config.h"

#include "qfx/quant/backend_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "model_inputs.h"
#include "qfx/quant/torch_device.h"
#include "qfx/runtime/cuda.h"
#include "yaml_util.h"

namespace qfx::quant {
namespace {

using namespace yaml;

std::vector<double> doubles(const std::string& path, const YAML::Node& n, const std::string& what) {
  std::vector<double> v;
  if (n.IsSequence()) {
    for (const auto& e : n) v.push_back(as_double(path, e, what));
    if (v.empty()) bad(path, n, what + " must not be empty");
  } else {
    v.push_back(as_double(path, n, what));
  }
  return v;
}

// A path value: not empty, each component within NAME_MAX (255 bytes) and the whole
// within PATH_MAX (4096), as Linux file systems allow; then resolved (resolve_path).
// Errors carry the key's file:line:column.
std::string as_path(const std::string& path, const YAML::Node& n, const std::string& what, const std::string& base) {
  const std::string v = as_string(path, n, what);
  if (v.empty()) bad(path, n, what + " must not be empty (a file or folder path)");
  std::string p;
  try {
    p = resolve_path(v, base);
  } catch (const ConfigError& e) {
    bad(path, n, what + ": " + e.what());
  }
  if (p.size() >= 4096) bad(path, n, what + " is " + std::to_string(p.size()) + " bytes long; paths are limited to 4095");
  for (const auto& part : std::filesystem::path(p))
    if (part.native().size() > 255)
      bad(path, n, what + ": the path component '" + part.native().substr(0, 40) + "...' is " +
                       std::to_string(part.native().size()) + " bytes; file systems allow at most 255");
  return p;
}

DataSpec read_source(const std::string& path, const YAML::Node& n, const std::string& what) {
  DataSpec d;
  if (!n.IsMap()) bad(path, n, what + " must be a mapping {format: ..., images: ...}");
  check_keys(path, n, what, {"format", "images", "labels", "mean", "std", "resize", "crop", "color"});
  if (auto f = n["format"]) d.format = as_choice(path, f, what + ".format", data_reader_formats());
  if (!n["images"]) bad(path, n, what + ".images is required");
  const std::string base = std::filesystem::path(path).parent_path().string();
  d.images = as_path(path, n["images"], what + ".images", base);
  if (auto l = n["labels"]) {
    const std::string v = as_string(path, l, what + ".labels");
    if (d.format == "images" && v != "subfolders") bad(path, l, what + ".labels of an image folder must be 'subfolders'");
    if (d.format == "raw") bad(path, l, what + ".labels: raw data has no labels");
    d.labels = d.format == "images" ? v : as_path(path, l, what + ".labels", base);
  }
  if (auto m = n["mean"]) d.mean = doubles(path, m, what + ".mean");
  if (auto s = n["std"]) {
    d.std = doubles(path, s, what + ".std");
    for (double x : d.std)
      if (!(x > 0)) bad(path, s, what + ".std must be positive");
  }
  const bool image_keys = n["resize"] || n["crop"] || n["color"];
  if (image_keys && d.format != "images") bad(path, n, what + ": resize, crop and color apply to format: images only");
  if (auto r = n["resize"]) {
    d.resize = as_int(path, r, what + ".resize");
    if (d.resize < 0) bad(path, r, what + ".resize must be >= 0");
  }
  if (auto c = n["crop"]) {
    d.crop = as_int(path, c, what + ".crop");
    if (d.crop < 0) bad(path, c, what + ".crop must be >= 0");
  }
  if (auto c = n["color"]) d.color = as_choice(path, c, what + ".color", {"rgb", "bgr", "gray"});
  return d;
}

// A data section: one source, or one per model input ({NAME: {format: ..., images:
// ...}, ...}, required for a model with several inputs), in the model's input order.
DataSpec read_data(const std::string& path, const YAML::Node& n, const std::string& what, const std::vector<InputSpec>& inputs) {
  bool named = n.IsMap() && !n["images"] && !n["format"];
  if (named) {
    named = inputs.size() > 1;
    for (const auto& in : inputs) named |= static_cast<bool>(n[in.name]);
  }
  std::string names;
  for (const auto& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
  if (!named) {
    if (inputs.size() > 1)
      bad(path, n, what + ": the model has " + std::to_string(inputs.size()) + " inputs (" + names +
                       "): give one source per input, {" + inputs[0].name + ": {format: npy, images: ...}, ...}");
    return read_source(path, n, what);
  }
  DataSpec d;
  for (const auto& kv : n) {
    const std::string key = key_name(path, kv.first, what);
    bool known = false;
    for (const auto& in : inputs) known |= in.name == key;
    if (!known) bad(path, kv.first, what + "." + key + ": the model has no input '" + key + "' (its inputs: " + names + ")");
  }
  for (const auto& in : inputs) {
    if (!n[in.name]) bad(path, n, what + ": no source for the model's input '" + in.name + "'");
    d.inputs.push_back(read_source(path, n[in.name], what + "." + in.name));
    d.inputs.back().input = in.name;
  }
  int labelled = 0;
  for (const auto& s : d.inputs) labelled += !s.labels.empty();
  if (labelled > 1) bad(path, n, what + ": labels are given for several inputs; give them in one input's source");
  for (const auto& s : d.inputs)
    if (!s.labels.empty()) d.labels = s.labels;  // the section's labels, for the checks that need them
  return d;
}

// The keys whose values are file or folder paths ("*" stands for each list item).
const std::vector<std::string>& path_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k = {"model.path", "model.libraries.*", "backend", "training.checkpoint", "training.resume",
                                  "output.dir"};
    for (const char* d : {"calibration.data", "evaluation.data", "training.data", "ptq.auto_fallback.data"})
      for (const char* f : {".images", ".labels", ".*.images", ".*.labels"}) k.push_back(std::string(d) + f);
    return k;
  }();
  return keys;
}

// A relative path given with --set is relative to the current directory (it was
// written on the command line, not in the file): make every path value under an
// overridden key absolute in `root` before the config's folder would apply.
void absolutize_overridden_paths(YAML::Node root, const std::vector<std::string>& overridden) {
  for (const std::string& key : path_keys()) {
    bool covered = false;
    for (const std::string& o : overridden) covered |= key == o || key.rfind(o + ".", 0) == 0;
    if (!covered) continue;
    std::vector<std::string> parts;
    for (size_t s = 0, d; s <= key.size(); s = d + 1) {
      d = key.find('.', s);
      if (d == std::string::npos) d = key.size();
      parts.push_back(key.substr(s, d - s));
    }
    std::function<void(YAML::Node, size_t)> walk = [&](YAML::Node n, size_t i) {
      if (i == parts.size()) {
        if (!n.IsScalar()) return;
        const std::string v = n.Scalar();
        const bool path_like = key != "backend" || v.find('/') != std::string::npos ||
                               (v.size() > 5 && v.compare(v.size() - 5, 5, ".yaml") == 0);
        if (!v.empty() && v[0] != '/' && v[0] != '$' && v != "subfolders" && path_like)
          n = (std::filesystem::current_path() / v).lexically_normal().string();
        return;
      }
      if (parts[i] == "*") {  // each list item, or each value of a mapping (per-input data)
        if (n.IsSequence())
          for (size_t j = 0; j < n.size(); ++j) walk(n[j], i + 1);
        if (n.IsMap())
          for (auto kv : n) walk(kv.second, i + 1);
        return;
      }
      if (!n.IsMap()) return;
      if (YAML::Node c = n[parts[i]]) walk(c, i + 1);
    };
    walk(root, 0);
  }
}

int64_t positive(const std::string& path, const YAML::Node& n, const std::string& what, bool allow_zero) {
  const int64_t v = as_int(path, n, what);
  if (v < 0 || (v == 0 && !allow_zero)) bad(path, n, what + (allow_zero ? " must be >= 0" : " must be >= 1"));
  return v;
}

}  // namespace

std::string resolve_path(const std::string& p_in, const std::string& base_dir) {
  std::string p;
  for (size_t i = 0; i < p_in.size(); ++i) {
    if (p_in.compare(i, 2, "${") == 0) {
      const size_t e = p_in.find('}', i);
      if (e == std::string::npos) throw ConfigError("unterminated ${ in path '" + p_in + "'");
      const std::string var = p_in.substr(i + 2, e - i - 2);
      const char* v = std::getenv(var.c_str());
      std::string val = v ? v : "";
      if (!v && var == "QFX_FIXTURES") val = default_fixture_dir();
      if (!v && val.empty()) throw ConfigError("path '" + p_in + "' uses ${" + var + "}, which is not set");
      p += val;
      i = e;
    } else {
      p += p_in[i];
    }
  }
  if (!p.empty() && p[0] != '/' && !base_dir.empty()) p = (std::filesystem::path(base_dir) / p).string();
  return p;
}

namespace {

// training.device: cpu, cuda or cuda:N; refused at load where libtorch cannot run there.
void read_training_device(const std::string& path, const YAML::Node& v, TrainingConfig* tc) {
  tc->device = as_string(path, v, "training.device");
  c10::Device d(c10::kCPU);
  try {
    d = parse_torch_device(tc->device, "training.device");
  } catch (const ConfigError& e) {
    bad(path, v, e.what());
  }
  if (const std::string why = torch_device_unavailable_reason(d); !why.empty())
    bad(path, v, "training.device: " + tc->device + ", but " + why);
}

// ptq.range_search: true, or {candidates: [minmax, percentile, entropy, mse, auto], num_samples, per_tensor}.
void read_range_search(const std::string& path, const YAML::Node& v, PtqAlgorithmsConfig* a) {
  if (!v.IsMap()) {
    a->range_search = as_bool(path, v, "ptq.range_search");
    return;
  }
  a->range_search = true;
  RangeSearchOptions& o = a->range_search_options;
  check_keys(path, v, "ptq.range_search", {"candidates", "num_samples", "per_tensor"});
  if (auto n = v["per_tensor"]) o.per_tensor = as_bool(path, n, "ptq.range_search.per_tensor");
  if (auto n = v["candidates"]) {
    if (!n.IsSequence() || n.size() == 0)
      bad(path, n, "ptq.range_search.candidates must be a list: [minmax, percentile, entropy, mse, auto]");
    o.candidates.clear();
    for (const auto& e : n)
      o.candidates.push_back(parse_algorithm(
          as_choice(path, e, "ptq.range_search.candidates", {"minmax", "percentile", "entropy", "kl", "mse", "auto"})));
  }
  if (auto n = v["num_samples"]) o.num_samples = positive(path, n, "ptq.range_search.num_samples", false);
}

// ptq.auto_fallback: true, or {metric, tolerance, min_sqnr_db, candidates, max_layers,
// ranking_samples, num_samples, data}.
void read_auto_fallback(const std::string& path, const YAML::Node& v, JobConfig* c) {
  PtqAlgorithmsConfig& a = c->ptq;
  AutoFallbackOptions& o = a.auto_fallback_options;
  if (!v.IsMap()) {
    a.auto_fallback = as_bool(path, v, "ptq.auto_fallback");
  } else {
    a.auto_fallback = true;
    check_keys(path, v, "ptq.auto_fallback",
               {"metric", "tolerance", "min_sqnr_db", "candidates", "max_layers", "ranking_samples", "num_samples", "data"});
    if (auto n = v["metric"]) o.metric = as_choice(path, n, "ptq.auto_fallback.metric", {"top1", "sqnr"});
    if (auto n = v["tolerance"]) {
      o.tolerance = as_double(path, n, "ptq.auto_fallback.tolerance");
      if (!(o.tolerance >= 0 && o.tolerance <= 100)) bad(path, n, "ptq.auto_fallback.tolerance must be in [0, 100] (points of top-1)");
    }
    if (auto n = v["min_sqnr_db"]) {
      o.min_sqnr_db = as_double(path, n, "ptq.auto_fallback.min_sqnr_db");
      if (!std::isfinite(o.min_sqnr_db)) bad(path, n, "ptq.auto_fallback.min_sqnr_db must be a finite number of dB");
    }
    if (auto n = v["candidates"]) {
      if (!n.IsSequence() || n.size() == 0) bad(path, n, "ptq.auto_fallback.candidates must be a list: [int16, float]");
      o.candidates.clear();
      for (const auto& e : n) o.candidates.push_back(as_choice(path, e, "ptq.auto_fallback.candidates", {"int16", "float"}));
    }
    if (auto n = v["max_layers"]) o.max_layers = positive(path, n, "ptq.auto_fallback.max_layers", true);
    if (auto n = v["ranking_samples"]) o.ranking_samples = positive(path, n, "ptq.auto_fallback.ranking_samples", false);
    if (auto n = v["num_samples"]) a.auto_fallback_samples = positive(path, n, "ptq.auto_fallback.num_samples", false);
    if (auto n = v["data"]) a.auto_fallback_data = read_data(path, n, "ptq.auto_fallback.data", c->model.inputs);
  }
  if (!a.auto_fallback || o.metric != "top1") return;
  const bool own = a.auto_fallback_data.given();
  const std::string& labels = own ? a.auto_fallback_data.labels : c->calibration.data.labels;
  if (labels.empty())
    bad(path, v, own ? "ptq.auto_fallback.metric top1 needs ptq.auto_fallback.data.labels"
                     : "ptq.auto_fallback.metric top1 needs labels for the held-out samples: set calibration.data.labels, "
                       "or ptq.auto_fallback.data, or metric: sqnr");
}

}  // namespace

JobConfig load_job_config(const std::string& path, const std::vector<std::string>& overrides) {
  YAML::Node root = load_file(path);
  if (!root.IsMap()) throw ConfigError(path + ": a PTQ config must be a YAML mapping");
  std::vector<std::string> overridden;
  for (const auto& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--set '" + o + "': expected KEY=VALUE (calibration.num_samples=64)");
    std::vector<std::string> keys;
    std::string key = o.substr(0, eq);
    for (size_t s = 0, d; s <= key.size(); s = d + 1) {
      d = key.find('.', s);
      if (d == std::string::npos) d = key.size();
      keys.push_back(key.substr(s, d - s));
    }
    overridden.push_back(key);
    YAML::Node cur = root;
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      if (!cur[keys[i]] || !cur[keys[i]].IsMap()) cur[keys[i]] = YAML::Node(YAML::NodeType::Map);
      cur.reset(cur[keys[i]]);
    }
    try {
      cur[keys.back()] = YAML::Load(o.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      throw ConfigError("--set '" + o + "': bad value (" + e.msg + ")");
    }
  }
  check_keys(path, root, "the config", job_config_sections());
  absolutize_overridden_paths(root, overridden);
  JobConfig c;
  c.path = path;
  c.effective_yaml = YAML::Dump(root);
  c.tracer = tracer_config_from_yaml(path, root);
  c.qconfig = qconfig_mapping_from_yaml(path, root);
  const std::string base = std::filesystem::path(path).parent_path().string();
  const YAML::Node m = root["model"];
  if (!m) bad(path, root, "'model' is required");
  check_keys(path, m, "model", {"path", "input_shape", "inputs", "libraries"});
  if (const YAML::Node libs = m["libraries"]) {
    if (!libs.IsSequence()) bad(path, libs, "model.libraries must be a list of operator libraries: [lib.so]");
    for (const auto& l : libs) c.tracer.options.libraries.push_back(as_path(path, l, "model.libraries", base));
  }
  if (!m["path"]) bad(path, m, "model.path is required");
  c.model.path = as_path(path, m["path"], "model.path", base);
  read_model_inputs(path, m, &c.model);
  for (const InputSpec& in : c.model.inputs) {  // shape specialisation while tracing
    c.tracer.options.input_shapes.push_back(in.shape);
    c.tracer.options.input_dtypes.push_back(in.dtype);
  }
  if (auto b = root["backend"]) {
    c.backend = as_string(path, b, "backend");
    // A backend YAML file (not a shipped backend's name) is a path like the others.
    if (c.backend.find('/') != std::string::npos || (c.backend.size() > 5 && c.backend.compare(c.backend.size() - 5, 5, ".yaml") == 0))
      c.backend = as_path(path, b, "backend", base);
  }
  const YAML::Node cal = root["calibration"];
  if (!cal && !root["training"]) bad(path, root, "'calibration' is required");
  if (cal) {
    check_keys(path, cal, "calibration", {"data", "num_samples", "batch_size", "seed", "device"});
    if (!cal["data"]) bad(path, cal, "calibration.data is required");
    c.calibration.enabled = true;
    c.calibration.data = read_data(path, cal["data"], "calibration.data", c.model.inputs);
    if (auto n = cal["num_samples"]) c.calibration.num_samples = positive(path, n, "calibration.num_samples", false);
    if (auto n = cal["batch_size"]) c.calibration.batch_size = positive(path, n, "calibration.batch_size", false);
    if (auto n = cal["device"]) {
      c.calibration.device = as_string(path, n, "calibration.device");
      if (c.calibration.device != "cpu" && c.calibration.device != "cuda")
        bad(path, n, "calibration.device must be cpu or cuda, got '" + c.calibration.device + "'");
      if (c.calibration.device == "cuda") {  // qfx's histogram kernel and libtorch's CUDA kernels
        std::string why = runtime::cuda_unavailable_reason();
        if (why.empty()) why = torch_device_unavailable_reason(c10::Device(c10::kCUDA));
        if (!why.empty()) bad(path, n, "calibration.device: cuda, but " + why);
      }
    }
    if (auto n = cal["seed"]) {
      c.calibration.seed = as_int(path, n, "calibration.seed");
      if (c.calibration.seed < -1) bad(path, n, "calibration.seed must be >= 0, or -1 for the first num_samples");
    }
  }
  if (const YAML::Node ev = root["evaluation"]; ev && !ev.IsNull()) {
    check_keys(path, ev, "evaluation", {"data", "num_samples", "batch_size", "metric", "sqnr_samples", "reference_check", "output"});
    if (!ev["data"]) bad(path, ev, "evaluation.data is required");
    EvaluationConfig& e = c.evaluation;
    e.enabled = true;
    e.data = read_data(path, ev["data"], "evaluation.data", c.model.inputs);
    if (auto n = ev["num_samples"]) e.num_samples = positive(path, n, "evaluation.num_samples", true);
    if (auto n = ev["batch_size"]) e.batch_size = positive(path, n, "evaluation.batch_size", false);
    if (auto n = ev["sqnr_samples"]) e.sqnr_samples = positive(path, n, "evaluation.sqnr_samples", true);
    if (auto n = ev["reference_check"]) {
      e.reference_check = as_int(path, n, "evaluation.reference_check");
      if (e.reference_check < -1) bad(path, n, "evaluation.reference_check must be -1 (all), 0 (off) or a count");
    }
    if (auto n = ev["output"]) {  // an index, or the key of a dictionary output
      int64_t index = 0;
      if (n.IsScalar() && !YAML::convert<int64_t>::decode(n, index)) e.output_key = as_string(path, n, "evaluation.output");
      else e.output = positive(path, n, "evaluation.output", true);
    }
    if (auto mt = ev["metric"]) e.metric = as_choice(path, mt, "evaluation.metric", {"top1", "cosine", "miou", "detection"});
    if (e.metric == "top1" && e.data.labels.empty()) bad(path, ev["data"], "evaluation.metric top1 needs evaluation.data.labels");
  }
  if (const YAML::Node t = root["training"]; t && !t.IsNull()) {
    TrainingConfig& tc = c.training;
    tc.enabled = true;
    check_keys(path, t, "training",
               {"data", "num_samples", "epochs", "batch_size", "optimizer", "lr_schedule", "freeze_bn_after",
                "disable_observer_after", "seed", "max_steps", "checkpoint", "resume", "device"});
    if (!t["data"]) bad(path, t, "training.data is required");
    tc.data = read_data(path, t["data"], "training.data", c.model.inputs);
    if (tc.data.labels.empty()) bad(path, t["data"], "training.data.labels is required");
    if (auto n = t["num_samples"]) tc.num_samples = positive(path, n, "training.num_samples", true);
    if (auto n = t["epochs"]) tc.epochs = positive(path, n, "training.epochs", false);
    if (auto n = t["batch_size"]) tc.batch_size = positive(path, n, "training.batch_size", false);
    if (const YAML::Node o = t["optimizer"]) {
      check_keys(path, o, "training.optimizer", {"type", "lr", "momentum", "weight_decay"});
      if (auto v = o["type"]) tc.optimizer = as_choice(path, v, "training.optimizer.type", {"sgd", "adam"});
      if (auto v = o["lr"]) {
        tc.lr = as_double(path, v, "training.optimizer.lr");
        if (!(tc.lr > 0)) bad(path, v, "training.optimizer.lr must be positive");
      }
      if (auto v = o["momentum"]) tc.momentum = as_double(path, v, "training.optimizer.momentum");
      if (auto v = o["weight_decay"]) tc.weight_decay = as_double(path, v, "training.optimizer.weight_decay");
    }
    if (const YAML::Node l = t["lr_schedule"]) {
      if (l.IsScalar()) {
        tc.lr_schedule = as_choice(path, l, "training.lr_schedule", {"constant", "cosine", "step"});
      } else {
        check_keys(path, l, "training.lr_schedule", {"type", "milestones"});
        if (auto v = l["type"]) tc.lr_schedule = as_choice(path, v, "training.lr_schedule.type", {"constant", "cosine", "step"});
        if (auto v = l["milestones"]) {
          if (!v.IsSequence()) bad(path, v, "training.lr_schedule.milestones must be a list of steps");
          for (const auto& e : v) tc.lr_steps.push_back(as_int(path, e, "training.lr_schedule.milestones"));
        }
      }
    }
    if (auto n = t["freeze_bn_after"]) tc.freeze_bn_after = as_int(path, n, "training.freeze_bn_after");
    if (auto n = t["disable_observer_after"]) tc.disable_observer_after = as_int(path, n, "training.disable_observer_after");
    if (auto n = t["seed"]) tc.seed = as_int(path, n, "training.seed");
    if (auto n = t["max_steps"]) tc.max_steps = positive(path, n, "training.max_steps", true);
    if (auto v = t["checkpoint"]) tc.checkpoint = as_path(path, v, "training.checkpoint", base);
    if (auto v = t["resume"]) tc.resume = as_path(path, v, "training.resume", base);
    if (auto v = t["device"]) read_training_device(path, v, &tc);
  }
  if (const YAML::Node p = root["ptq"]; p && !p.IsNull()) {
    if (!p.IsMap()) bad(path, p, "ptq must be a mapping {cross_layer_equalization: ..., adaround: ..., bias_correction: ...}");
    check_keys(path, p, "ptq", {"cross_layer_equalization", "smoothquant", "sensitivity", "adaround", "bias_correction", "auto_fallback", "range_search"});
    PtqAlgorithmsConfig& a = c.ptq;
    // `true` / `false`, or a mapping of options {num_samples: N}, which also enables it.
    auto switch_with_samples = [&](const char* key, bool* on, int64_t* samples) {
      const YAML::Node v = p[key];
      if (!v) return;
      const std::string what = std::string("ptq.") + key;
      if (!v.IsMap()) {
        *on = as_bool(path, v, what);
        return;
      }
      *on = true;
      check_keys(path, v, what, {"num_samples"});
      if (auto n = v["num_samples"]) *samples = positive(path, n, what + ".num_samples", false);
    };
    switch_with_samples("sensitivity", &a.sensitivity, &a.sensitivity_samples);
    switch_with_samples("bias_correction", &a.bias_correction, &a.bias_correction_samples);
    if (auto v = p["cross_layer_equalization"]) a.cross_layer_equalization = as_bool(path, v, "ptq.cross_layer_equalization");
    if (auto v = p["smoothquant"]) {
      if (v.IsMap()) {
        a.smoothquant = true;
        check_keys(path, v, "ptq.smoothquant", {"alpha", "num_samples"});
        if (auto n = v["alpha"]) {
          a.smoothquant_alpha = as_double(path, n, "ptq.smoothquant.alpha");
          if (!(a.smoothquant_alpha > 0 && a.smoothquant_alpha < 1)) bad(path, n, "ptq.smoothquant.alpha must be in (0, 1)");
        }
        if (auto n = v["num_samples"]) a.smoothquant_samples = positive(path, n, "ptq.smoothquant.num_samples", false);
      } else {
        a.smoothquant = as_bool(path, v, "ptq.smoothquant");
      }
    }
    if (auto v = p["range_search"]) read_range_search(path, v, &a);
    if (auto v = p["adaround"]) {
      if (v.IsMap()) {
        a.adaround = true;
        AdaRoundOptions& o = a.adaround_options;
        check_keys(path, v, "ptq.adaround", {"iterations", "lr", "reg", "beta", "warmup", "batch_size", "num_samples", "seed"});
        if (auto n = v["iterations"]) o.iterations = positive(path, n, "ptq.adaround.iterations", false);
        if (auto n = v["batch_size"]) o.batch_size = positive(path, n, "ptq.adaround.batch_size", false);
        if (auto n = v["num_samples"]) o.num_samples = positive(path, n, "ptq.adaround.num_samples", false);
        if (auto n = v["seed"]) o.seed = static_cast<uint64_t>(positive(path, n, "ptq.adaround.seed", true));
        if (auto n = v["lr"]) {
          o.lr = as_double(path, n, "ptq.adaround.lr");
          if (!(o.lr > 0)) bad(path, n, "ptq.adaround.lr must be positive");
        }
        if (auto n = v["reg"]) {
          o.reg = as_double(path, n, "ptq.adaround.reg");
          if (!(o.reg >= 0)) bad(path, n, "ptq.adaround.reg must be >= 0");
        }
        if (auto n = v["warmup"]) {
          o.warmup = as_double(path, n, "ptq.adaround.warmup");
          if (!(o.warmup >= 0 && o.warmup < 1)) bad(path, n, "ptq.adaround.warmup must be in [0, 1)");
        }
        if (auto n = v["beta"]) {
          const auto b = doubles(path, n, "ptq.adaround.beta");
          if (b.size() != 2 || !(b[0] >= b[1]) || !(b[1] > 0)) bad(path, n, "ptq.adaround.beta must be [start, end] with start >= end > 0");
          o.beta_start = b[0];
          o.beta_end = b[1];
        }
      } else {
        a.adaround = as_bool(path, v, "ptq.adaround");
      }
    }
  }
  if (const YAML::Node p = root["ptq"]; p && p.IsMap())
    if (const YAML::Node v = p["auto_fallback"]) read_auto_fallback(path, v, &c);
  // Without output.dir the outputs go to the current directory, whatever config ran.
  c.output.dir = root["training"] && !root["training"].IsNull() ? "qfx_qat_out" : "qfx_ptq_out";
  if (const YAML::Node out = root["output"]) {
    check_keys(path, out, "output", {"dir", "float_model", "report_html"});
    if (auto d = out["dir"]) c.output.dir = as_path(path, d, "output.dir", base);
    if (auto f = out["float_model"]) c.output.float_model = as_bool(path, f, "output.float_model");
    if (auto f = out["report_html"]) c.output.report_html = as_bool(path, f, "output.report_html");
  }
  return c;
}

}  // namespace qfx::quant
