// Internal: reads one mapping of a config file through its key table: unknown
// keys, required keys, types and ranges are checked as the table says, with
// file:line:column errors naming the key.
#pragma once

#include <string>

#include "qfx/quant/config_keys.h"
#include "yaml_util.h"

namespace qfx::quant {

/// One mapping of config file `path` (`what`: its dotted name, "calibration") read
/// through `table`. Construction checks that `node` is a mapping, that every key is
/// in the table (ConfigError "unknown key", with the closest known key) and that
/// the required ones are present ("X.key is required"). The readers leave `*out`
/// as it is when the key is absent; a present key's value must have the table's
/// type and lie in its range (ConfigError at the value otherwise). Asking for a key
/// the table does not list, or with another type, is a std::logic_error (a bug).
class SectionReader {
 public:
  SectionReader(std::string path, const YAML::Node& node, std::string what, const KeyTable& table);

  /// The value of `key`, or an undefined node when absent.
  YAML::Node operator[](const std::string& key) const;
  /// The dotted name of `key` in the file ("calibration.num_samples").
  std::string what(const std::string& key) const { return what_ + "." + key; }
  const std::string& path() const { return path_; }
  const std::string& section() const { return what_; }
  const YAML::Node& node() const { return node_; }
  /// The config file's folder: relative paths in it are relative to this.
  std::string base() const;

  /// kBool.
  void read(const std::string& key, bool* out) const;
  /// kInt, checked against the key's range.
  void read(const std::string& key, int64_t* out) const;
  /// kNumber, checked against the key's range.
  void read(const std::string& key, double* out) const;
  /// kString as is, kChoice one of the key's choices, kPath resolved (read_path).
  void read(const std::string& key, std::string* out) const;

  /// The key's entry in the table (logic_error if absent).
  const ConfigKey& key(const std::string& name) const;

 private:
  const ConfigKey& typed(const std::string& name, KeyType type) const;
  std::string path_;
  YAML::Node node_;
  std::string what_;
  const KeyTable& table_;
};

/// A path value of config `path` at `n`: not empty, each component within
/// NAME_MAX (255 bytes) and the whole within PATH_MAX (4096), then resolved
/// (resolve_path, relative to `base`). Errors carry the key's file:line:column.
std::string read_path(const std::string& path, const YAML::Node& n, const std::string& what, const std::string& base);

/// One number, or a non-empty list of numbers.
std::vector<double> read_doubles(const std::string& path, const YAML::Node& n, const std::string& what);

}  // namespace qfx::quant
