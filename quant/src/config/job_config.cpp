#include "qfx/quant/job_config.h"
#include "qfx/quant/job_config_text.h"

#include <cstdlib>
#include <filesystem>
#include <functional>

#include "qfx/quant/backend_config.h"
#include "sections/sections.h"

namespace qfx::quant {
namespace {

using namespace yaml;

// A relative path given with --set is relative to the current directory (it was
// written on the command line, not in the file): make every path value under an
// overridden key absolute in `root` before the config's folder would apply.
void absolutize_overridden_paths(YAML::Node root, const std::vector<std::string>& overridden) {
  for (const std::string& key : sections::path_keys()) {
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

// Applies each --set KEY=VALUE to `root` (missing mappings on the way created);
// returns the overridden keys.
std::vector<std::string> apply_overrides(YAML::Node root, const std::vector<std::string>& overrides,
                                         OverrideScope* scope) {
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
    YAML::Node key_node;
    for (const auto& kv : cur)
      if (kv.first.IsScalar() && kv.first.Scalar() == keys.back()) key_node = kv.first;
    scope->add(key_node, cur[keys.back()], o);
  }
  return overridden;
}

// The given, non-null section `key` of `root`, or an undefined node.
YAML::Node given(const YAML::Node& root, const char* key) {
  const YAML::Node n = root[key];
  return n && !n.IsNull() ? n : YAML::Node(YAML::NodeType::Undefined);
}

// backend: a shipped backend's name, or a backend YAML file (a path like the others).
void read_backend(const std::string& path, const YAML::Node& b, JobConfig* c) {
  c->backend = as_string(path, b, "backend");
  if (c->backend.find('/') != std::string::npos || (c->backend.size() > 5 && c->backend.compare(c->backend.size() - 5, 5, ".yaml") == 0))
    c->backend = read_path(path, b, "backend", std::filesystem::path(path).parent_path().string());
}

// The sections after the model (whose inputs the data sections need), in order.
void read_sections(const std::string& path, const YAML::Node& root, JobConfig* c) {
  auto section = [&](const char* key) { return SectionReader(path, root[key], key, *job_config_keys().find(key)->keys); };
  if (auto b = root["backend"]) read_backend(path, b, c);
  if (!root["calibration"] && !root["training"]) bad(path, root, "'calibration' is required");
  if (root["calibration"]) sections::read_calibration(section("calibration"), c);
  if (given(root, "evaluation")) sections::read_evaluation(section("evaluation"), c);
  if (given(root, "training")) sections::read_training(section("training"), c);
  if (const YAML::Node p = given(root, "ptq")) {
    if (!p.IsMap()) bad(path, p, "ptq must be a mapping {cross_layer_equalization: ..., adaround: ..., bias_correction: ...}");
    sections::read_ptq(section("ptq"), c);
  }
  // Without output.dir the outputs go to the current directory, whatever config ran.
  c->output.dir = given(root, "training") ? "qfx_qat_out" : "qfx_ptq_out";
  if (root["output"]) sections::read_output(section("output"), c);
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

JobConfig job_config_from_yaml(const std::string& path, YAML::Node root, const std::vector<std::string>& overrides) {
  if (!root.IsMap()) throw ConfigError(path + ": a PTQ config must be a YAML mapping");
  OverrideScope scope;  // errors in a --set value name the override
  const std::vector<std::string> overridden = apply_overrides(root, overrides, &scope);
  check_keys(path, root, "the config", job_config_sections());
  absolutize_overridden_paths(root, overridden);
  JobConfig c;
  c.path = path;
  c.effective_yaml = YAML::Dump(root);
  c.tracer = tracer_config_from_yaml(path, root);
  c.qconfig = qconfig_mapping_from_yaml(path, root);
  if (!root["model"]) bad(path, root, "'model' is required");
  sections::read_model(SectionReader(path, root["model"], "model", sections::model_keys()), &c);
  read_sections(path, root, &c);
  return c;
}

}  // namespace

JobConfig load_job_config(const std::string& path, const std::vector<std::string>& overrides) {
  return job_config_from_yaml(path, load_file(path), overrides);
}

JobConfig load_job_config_text(const std::string& yaml, const std::string& name, const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(name + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": YAML syntax error: " + e.msg);
  }
  return job_config_from_yaml(name, root, overrides);
}

}  // namespace qfx::quant
