// Internal: checked YAML reading with file:line:column errors (yaml-cpp).
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <vector>

#include "qfx/error.h"

namespace qfx::quant::yaml {

/// "path:line:column" of `n` (just `path` when yaml-cpp has no mark); for a node a
/// `--set` override put there (see OverrideScope), "--set 'KEY=VALUE'".
std::string loc(const std::string& path, const YAML::Node& n);

/// While alive, errors about the nodes registered with `add` (a --set value and
/// everything inside it, and the key it set) name the override instead of a place
/// in the config file. One scope per thread at a time.
class OverrideScope {
 public:
  OverrideScope() = default;
  ~OverrideScope();
  /// Registers `value`, its descendants and `key` (may be undefined) as coming from `text`.
  void add(const YAML::Node& key, const YAML::Node& value, const std::string& text);
  OverrideScope(const OverrideScope&) = delete;
  OverrideScope& operator=(const OverrideScope&) = delete;
};

/// Throws ConfigError "path:line:column: what".
[[noreturn]] void bad(const std::string& path, const YAML::Node& n, const std::string& what);

/// Parses the file. IoError if unreadable, ConfigError with the location of a
/// syntax error.
YAML::Node load_file(const std::string& path);

/// The top-level sections of a `qfx ptq` / `qfx qat` config file: the names of
/// job_config_keys() (one table for every reader that checks them).
const std::set<std::string>& job_config_sections();

/// Requires a mapping whose keys all belong to `known`; names the unknown key,
/// lists the known ones and, for a likely typo, the closest (closest_key).
void check_keys(const std::string& path, const YAML::Node& map, const std::string& section,
                const std::set<std::string>& known);

/// Typed scalar readers: ConfigError naming `what` and the expected type.
/// The text of a mapping key; a key that is not a plain scalar (a list or mapping
/// used as a key) is a ConfigError at its file:line:column naming `section`.
std::string key_name(const std::string& path, const YAML::Node& key, const std::string& section);
/// A finite number (.inf and .nan are refused: no setting means them).
double as_double(const std::string& path, const YAML::Node& n, const std::string& what);
int64_t as_int(const std::string& path, const YAML::Node& n, const std::string& what);
bool as_bool(const std::string& path, const YAML::Node& n, const std::string& what);
std::string as_string(const std::string& path, const YAML::Node& n, const std::string& what);
/// A string that must be one of `choices`.
std::string as_choice(const std::string& path, const YAML::Node& n, const std::string& what,
                      const std::vector<std::string>& choices);
/// A list of strings.
std::vector<std::string> as_string_list(const std::string& path, const YAML::Node& n, const std::string& what);

}  // namespace qfx::quant::yaml

namespace qfx::runtime {
struct Arithmetic;
}
namespace qfx::quant {
struct BackendConfig;
/// The `arithmetic:` section of backend file `path` (read after its scale and ops:
/// `shift` needs power-of-two scales, a LUT op must be quantized on `b`).
runtime::Arithmetic read_arithmetic(const std::string& path, const YAML::Node& a, const BackendConfig& b);
struct TracerConfig;
class QConfigMapping;
/// The `tracer:` / `qconfig:` sections of an already parsed config (`path` for
/// error locations); load_tracer_config / QConfigMapping::load and the PTQ config
/// (which applies --set overrides to the parsed YAML first) share these.
TracerConfig tracer_config_from_yaml(const std::string& path, const YAML::Node& root);
QConfigMapping qconfig_mapping_from_yaml(const std::string& path, const YAML::Node& root);
}  // namespace qfx::quant
