// final_config_yaml: the config that reproduces a PTQ run after automatic fallback.
#include <filesystem>

#include "qfx/quant/job_config.h"
#include "yaml_util.h"

namespace qfx::quant {
namespace {

namespace fs = std::filesystem;

std::string absolute(const std::string& p) { return p.empty() ? p : fs::absolute(p).lexically_normal().string(); }

// images and labels of one data source, as the loader resolved them.
void set_source_paths(YAML::Node data, const DataSpec& d) {
  data["images"] = absolute(d.images);
  if (data["labels"] && d.labels != "subfolders") data["labels"] = absolute(d.labels);
}

// The paths of one data section: its source, or each input's.
void set_data_paths(YAML::Node section, const DataSpec& d) {
  if (!section || !section.IsMap() || !section["data"] || !section["data"].IsMap()) return;
  YAML::Node data = section["data"];
  if (!d.per_input()) return set_source_paths(data, d);
  for (const DataSpec& s : d.inputs)
    if (data[s.input] && data[s.input].IsMap()) set_source_paths(data[s.input], s);
}

}  // namespace

std::string final_config_yaml(const JobConfig& cfg, const std::vector<std::string>& float_modules,
                              const std::vector<std::string>& int16_modules, const std::string& header) {
  YAML::Node root = YAML::Load(cfg.effective_yaml);
  root["model"]["path"] = absolute(cfg.model.path);
  if (root["model"]["libraries"]) {
    YAML::Node libs(YAML::NodeType::Sequence);
    for (const auto& l : cfg.tracer.options.libraries) libs.push_back(absolute(l));
    root["model"]["libraries"] = libs;
  }
  if (fs::is_regular_file(cfg.backend)) root["backend"] = absolute(cfg.backend);
  set_data_paths(root["calibration"], cfg.calibration.data);
  if (cfg.evaluation.enabled) set_data_paths(root["evaluation"], cfg.evaluation.data);
  if (cfg.training.enabled) set_data_paths(root["training"], cfg.training.data);
  if (cfg.training.enabled) {
    if (!cfg.training.checkpoint.empty()) root["training"]["checkpoint"] = absolute(cfg.training.checkpoint);
    if (!cfg.training.resume.empty()) root["training"]["resume"] = absolute(cfg.training.resume);
  }
  root["output"]["dir"] = absolute(cfg.output.dir);
  if (root["ptq"] && root["ptq"].IsMap()) root["ptq"].remove("auto_fallback");
  if (!float_modules.empty() || !int16_modules.empty()) {
    if (!root["qconfig"] || !root["qconfig"].IsMap()) root["qconfig"] = YAML::Node(YAML::NodeType::Map);
    YAML::Node q = root["qconfig"];
    if (!q["module_name"] || !q["module_name"].IsMap()) q["module_name"] = YAML::Node(YAML::NodeType::Map);
    YAML::Node names = q["module_name"];
    for (const auto& m : float_modules) names[m] = YAML::Node(YAML::NodeType::Null);
    for (const auto& m : int16_modules) {
      // The global qconfig (its observer, algorithm, scheme, weights), 16-bit outputs.
      YAML::Node wide = q["global"] && q["global"].IsMap() ? YAML::Clone(q["global"]) : YAML::Node(YAML::NodeType::Map);
      if (!wide["activation"] || !wide["activation"].IsMap()) wide["activation"] = YAML::Node(YAML::NodeType::Map);
      wide["activation"]["dtype"] = "s16";
      wide["activation"].remove("bits");
      names[m] = wide;
    }
  }
  std::string out;
  for (size_t s = 0; s < header.size();) {
    const size_t e = std::min(header.find('\n', s), header.size());
    out += "# " + header.substr(s, e - s) + "\n";
    s = e + 1;
  }
  return out + YAML::Dump(root) + "\n";
}

}  // namespace qfx::quant
