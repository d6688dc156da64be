#include "yaml_util.h"

#include <cmath>
#include <fstream>

#include "qfx/quant/config_keys.h"

namespace qfx::quant::yaml {

namespace {
thread_local std::vector<std::pair<YAML::Node, std::string>> overridden_nodes;

void register_tree(const YAML::Node& n, const std::string& text) {
  overridden_nodes.emplace_back(n, text);
  if (n.IsSequence())
    for (const auto& e : n) register_tree(e, text);
  if (n.IsMap())
    for (const auto& kv : n) {
      overridden_nodes.emplace_back(kv.first, text);
      register_tree(kv.second, text);
    }
}
}  // namespace

OverrideScope::~OverrideScope() { overridden_nodes.clear(); }

void OverrideScope::add(const YAML::Node& key, const YAML::Node& value, const std::string& text) {
  if (key.IsDefined()) overridden_nodes.emplace_back(key, text);
  register_tree(value, text);
}

std::string loc(const std::string& path, const YAML::Node& n) {
  for (const auto& [node, text] : overridden_nodes)
    if (node.is(n)) return "--set '" + text + "'";
  const auto m = n.Mark();
  if (m.is_null()) return path;
  return path + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

void bad(const std::string& path, const YAML::Node& n, const std::string& what) {
  // A message quotes the offending value: a huge one (a 200 MB scalar) is cut, so
  // the error stays one readable line.
  constexpr size_t kMax = 600;
  std::string w = what;
  if (w.size() > kMax) w = w.substr(0, kMax) + "... (" + std::to_string(what.size() - kMax) + " more characters)";
  throw ConfigError(loc(path, n) + ": " + w);
}

YAML::Node load_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw IoError(path + ": cannot open config file (missing or unreadable)");
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": YAML syntax error: " + e.msg);
  }
}

void check_keys(const std::string& path, const YAML::Node& map, const std::string& section,
                const std::set<std::string>& known) {
  if (!map.IsMap()) bad(path, map, "'" + section + "' must be a mapping");
  for (const auto& kv : map) {
    const std::string key = key_name(path, kv.first, section);
    if (!known.count(key)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      const std::string near = closest_key(key, std::vector<std::string>(known.begin(), known.end()));
      bad(path, kv.first, "unknown key '" + key + "' in " + section + " (known: " + list + ")" +
                              (near.empty() ? "" : "; did you mean '" + near + "'?"));
    }
  }
}

std::string key_name(const std::string& path, const YAML::Node& key, const std::string& section) {
  if (!key.IsScalar()) bad(path, key, "keys in " + section + " must be plain names, not lists or mappings");
  return key.Scalar();
}

namespace {

// A scalar converted by yaml-cpp, or a ConfigError at its position saying it must be
// `kind` (and what it was).
template <typename T>
T scalar_as(const std::string& path, const YAML::Node& n, const std::string& what, const std::string& kind) {
  if (!n.IsScalar()) bad(path, n, what + " must be " + kind);
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    bad(path, n, what + " must be " + kind + ", got '" + n.Scalar() + "'");
  }
}

}  // namespace

double as_double(const std::string& path, const YAML::Node& n, const std::string& what) {
  const double v = scalar_as<double>(path, n, what, "a number");
  // No qfx setting means infinity or NaN (YAML's .inf, .nan): an input std of .inf
  // would turn every input into 0 and a NaN would spread through calibration.
  if (!std::isfinite(v)) bad(path, n, what + " must be a finite number, not " + n.Scalar());
  return v;
}

int64_t as_int(const std::string& path, const YAML::Node& n, const std::string& what) {
  return scalar_as<int64_t>(path, n, what, "an integer");
}

bool as_bool(const std::string& path, const YAML::Node& n, const std::string& what) {
  return scalar_as<bool>(path, n, what, "true or false");
}

std::string as_string(const std::string& path, const YAML::Node& n, const std::string& what) {
  if (!n.IsScalar()) bad(path, n, what + " must be a string");
  return n.Scalar();
}

std::string as_choice(const std::string& path, const YAML::Node& n, const std::string& what,
                      const std::vector<std::string>& choices) {
  const std::string s = as_string(path, n, what);
  for (const auto& c : choices)
    if (c == s) return s;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  bad(path, n, "bad " + what + " '" + s + "' (expected one of: " + list + ")");
}

std::vector<std::string> as_string_list(const std::string& path, const YAML::Node& n, const std::string& what) {
  if (!n.IsSequence()) bad(path, n, what + " must be a list of strings");
  std::vector<std::string> out;
  for (const auto& e : n) out.push_back(as_string(path, e, what + " entries"));
  return out;
}

}  // namespace qfx::quant::yaml
