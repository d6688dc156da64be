// The top level of a job config: its sections, and the path keys derived from them.
#include <functional>
#include <set>

#include "sections.h"

namespace qfx::quant {

const KeyTable& job_config_keys() {
  using sections::qconfig_keys;
  static const KeyTable t{"the config", {
      {"model", KeyType::kSection, {}, {}, "required", "the float model and its inputs", &sections::model_keys()},
      {"tracer", KeyType::kSection, {}, {}, "{}", "how the model is traced", &sections::tracer_keys()},
      {"backend", KeyType::kPath, {}, {}, "onednn", "a shipped backend's name, or a backend YAML path"},
      {"qconfig", KeyType::kSection, {}, {}, "the backend's", "how tensors are quantized", &qconfig_keys()},
      {"calibration", KeyType::kSection, {}, {}, "required by qfx ptq", "the calibration samples", &sections::calibration_keys()},
      {"evaluation", KeyType::kSection, {}, {}, "null", "fp32 against int8 on held-out samples", &sections::evaluation_keys()},
      {"training", KeyType::kSection, {}, {}, "null", "qfx qat's training loop", &sections::training_keys()},
      {"ptq", KeyType::kSection, {}, {}, "{}", "accuracy algorithms on the calibration data", &sections::ptq_keys()},
      {"output", KeyType::kSection, {}, {}, "{}", "where the outputs go", &sections::output_keys()},
  }};
  return t;
}

const std::set<std::string>& yaml::job_config_sections() {
  static const std::set<std::string> s = [] {
    const std::vector<std::string> n = job_config_keys().names();
    return std::set<std::string>(n.begin(), n.end());
  }();
  return s;
}

namespace sections {

std::vector<std::string> path_keys() {
  std::vector<std::string> out;
  std::function<void(const KeyTable&, const std::string&)> walk = [&](const KeyTable& t, const std::string& prefix) {
    for (const ConfigKey& k : t.keys) {
      const std::string name = prefix + k.name;
      if (k.type == KeyType::kPath) out.push_back(name);
      if (k.type == KeyType::kPaths) out.push_back(name + ".*");
      if (k.type == KeyType::kData)
        for (const char* f : {".images", ".labels", ".*.images", ".*.labels"}) out.push_back(name + f);
      else if (k.keys)
        walk(*k.keys, name + ".");
    }
  };
  walk(job_config_keys(), "");
  return out;
}

}  // namespace sections
}  // namespace qfx::quant
