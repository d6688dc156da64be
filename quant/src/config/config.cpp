#include "qfx/quant/config.h"

#include "yaml_util.h"

#include <set>

#include "qfx/error.h"

namespace qfx::quant {
using namespace yaml;

TracerConfig load_tracer_config(const std::string& path) { return tracer_config_from_yaml(path, load_file(path)); }

TracerConfig tracer_config_from_yaml(const std::string& path, const YAML::Node& root) {
  TracerConfig cfg;
  if (root.IsNull()) return cfg;
  check_keys(path, root, "the config", job_config_sections());
  const YAML::Node t = root["tracer"];
  if (!t || t.IsNull()) return cfg;
  check_keys(path, t, "tracer", {"wrap", "use_model_annotations", "max_unroll"});
  if (const auto w = t["wrap"]) {
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
  try {
    if (const auto u = t["use_model_annotations"]) cfg.options.use_model_annotations = u.as<bool>();
  } catch (const YAML::Exception&) {
    bad(path, t["use_model_annotations"], "tracer.use_model_annotations must be true or false");
  }
  if (const auto m = t["max_unroll"]) {
    try {
      cfg.options.max_unroll = m.as<int64_t>();
    } catch (const YAML::Exception&) {
      bad(path, m, "tracer.max_unroll must be an integer");
    }
    if (cfg.options.max_unroll < 1) bad(path, m, "tracer.max_unroll must be at least 1");
  }
  return cfg;
}

}  // namespace qfx::quant
