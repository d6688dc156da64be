#include "qfx/quant/config.h"

#include "sections/sections.h"
#include "yaml_util.h"

#include <set>

#include "qfx/error.h"

namespace qfx::quant {
using namespace yaml;

TracerConfig load_tracer_config(const std::string& path) { return tracer_config_from_yaml(path, load_file(path)); }

namespace sections {

const KeyTable& tracer_keys() {
  static const KeyTable t{"tracer", {
      {"wrap", KeyType::kList, {}, {}, "[]", "calls kept whole: methods, functions, module types or paths"},
      {"use_model_annotations", KeyType::kBool, {}, {}, "true", "merge the model's __qfx_wrap__ entries"},
      {"max_unroll", KeyType::kInt, {}, {1, kNoBound, false, false, "must be at least 1"}, "4096",
       "loops with a constant trip count unroll up to this many iterations"},
  }};
  return t;
}

}  // namespace sections

TracerConfig tracer_config_from_yaml(const std::string& path, const YAML::Node& root) {
  TracerConfig cfg;
  if (root.IsNull()) return cfg;
  check_keys(path, root, "the config", job_config_sections());
  const YAML::Node t = root["tracer"];
  if (!t || t.IsNull()) return cfg;
  const SectionReader s(path, t, "tracer", sections::tracer_keys());
  if (const auto w = s["wrap"]) {
    if (!w.IsSequence()) bad(path, w, "tracer.wrap must be a list of strings");
    for (const auto& e : w) {
      if (!e.IsScalar()) bad(path, e, "tracer.wrap entries must be strings");
      try {
        cfg.options.wrap.push_back(fx::WrapSpec::parse(e.as<std::string>()));
      } catch (const ConfigError& ce) {
        bad(path, e, ce.what());
      }
    }
  }
  s.read("use_model_annotations", &cfg.options.use_model_annotations);
  s.read("max_unroll", &cfg.options.max_unroll);
  return cfg;
}

}  // namespace qfx::quant
