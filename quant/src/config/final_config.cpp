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

// cfg.effective_yaml with the model, data, backend, checkpoint and output paths absolute.
YAML::Node absolute_paths(const JobConfig& cfg) {
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
  return root;
}

// qconfig.module_name of `root`, created if absent.
YAML::Node module_names(YAML::Node root) {
  if (!root["qconfig"] || !root["qconfig"].IsMap()) root["qconfig"] = YAML::Node(YAML::NodeType::Map);
  YAML::Node q = root["qconfig"];
  if (!q["module_name"] || !q["module_name"].IsMap()) q["module_name"] = YAML::Node(YAML::NodeType::Map);
  return q["module_name"];
}

// `header` as leading comment lines, then the YAML.
std::string with_header(const YAML::Node& root, const std::string& header) {
  std::string out;
  for (size_t s = 0; s < header.size();) {
    const size_t e = std::min(header.find('\n', s), header.size());
    out += "# " + header.substr(s, e - s) + "\n";
    s = e + 1;
  }
  return out + YAML::Dump(root) + "\n";
}

// A copy of the entry of `qconfig` that `matched_by` names (an empty mapping for an absent one).
YAML::Node matched_entry(const YAML::Node& qconfig, const std::string& matched_by) {
  YAML::Node found;
  if (qconfig && qconfig.IsMap()) {
    if (matched_by == "global") {
      found = qconfig["global"];
    } else if (const size_t colon = matched_by.find(':'); colon != std::string::npos) {
      const YAML::Node table = qconfig[matched_by.substr(0, colon)];
      if (table && table.IsMap()) found = table[matched_by.substr(colon + 1)];
    }
  }
  return found && found.IsMap() ? YAML::Clone(found) : YAML::Node(YAML::NodeType::Map);
}

YAML::Node sub_map(YAML::Node n, const char* key) {
  if (!n[key] || !n[key].IsMap()) n[key] = YAML::Node(YAML::NodeType::Map);
  return n[key];
}

}  // namespace

std::string final_config_yaml(const JobConfig& cfg, const std::vector<ModuleQConfigEdit>& edits, const std::string& header) {
  YAML::Node root = absolute_paths(cfg);
  if (root["ptq"] && root["ptq"].IsMap()) root["ptq"].remove("mixed_precision");
  const YAML::Node qconfig = YAML::Clone(root["qconfig"]);
  if (!edits.empty()) {
    YAML::Node names = module_names(root);
    for (const auto& e : edits) {
      if (e.keep_float) {
        names[e.module] = YAML::Node(YAML::NodeType::Null);
        continue;
      }
      YAML::Node q = matched_entry(qconfig, e.matched_by);
      YAML::Node w = sub_map(q, "weight");
      if (e.weight_bits > 0) w["bits"] = e.weight_bits;
      if (e.weight_block_size > 0) {
        w["granularity"] = "per_block";
        w["block_size"] = e.weight_block_size;
      } else if (e.weight_block_size == 0) {
        w["granularity"] = "per_channel";
        w.remove("block_size");
      }
      if (!e.activation_dtype.empty()) {
        YAML::Node a = sub_map(q, "activation");
        a["dtype"] = e.activation_dtype;
        a.remove("bits");
      }
      names[e.module] = q;
    }
  }
  return with_header(root, header);
}

std::string final_config_yaml(const JobConfig& cfg, const std::vector<std::string>& float_modules,
                              const std::vector<std::string>& int16_modules, const std::string& header) {
  YAML::Node root = absolute_paths(cfg);
  if (root["ptq"] && root["ptq"].IsMap()) root["ptq"].remove("auto_fallback");
  if (!float_modules.empty() || !int16_modules.empty()) {
    const YAML::Node global = root["qconfig"] ? YAML::Clone(root["qconfig"]["global"]) : YAML::Node();
    YAML::Node names = module_names(root);
    for (const auto& m : float_modules) names[m] = YAML::Node(YAML::NodeType::Null);
    for (const auto& m : int16_modules) {
      // The global qconfig (its observer, algorithm, scheme, weights), 16-bit outputs.
      YAML::Node wide = global && global.IsMap() ? YAML::Clone(global) : YAML::Node(YAML::NodeType::Map);
      YAML::Node a = sub_map(wide, "activation");
      a["dtype"] = "s16";
      a.remove("bits");
      names[m] = wide;
    }
  }
  return with_header(root, header);
}

}  // namespace qfx::quant
