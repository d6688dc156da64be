#include "qfx/quant/config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

#include "qfx/error.h"

namespace qfx::quant {
namespace {

std::string loc(const std::string& path, const YAML::Node& n) {
  const auto m = n.Mark();
  if (m.is_null()) return path;
  return path + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

[[noreturn]] void bad(const std::string& path, const YAML::Node& n, const std::string& what) {
  throw ConfigError(loc(path, n) + ": " + what);
}

void check_keys(const std::string& path, const YAML::Node& map, const std::string& section,
                const std::set<std::string>& known) {
  if (!map.IsMap()) bad(path, map, "'" + section + "' must be a mapping");
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (!known.count(key)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      bad(path, kv.first, "unknown key '" + key + "' in " + section + " (known: " + list + ")");
    }
  }
}

}  // namespace

TracerConfig load_tracer_config(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw IoError(path + ": cannot open config file (missing or unreadable)");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": YAML syntax error: " + e.msg);
  }
  TracerConfig cfg;
  if (root.IsNull()) return cfg;
  check_keys(path, root, "the config",
             {"model", "tracer", "backend", "qconfig", "calibration", "evaluation", "output", "training"});
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
