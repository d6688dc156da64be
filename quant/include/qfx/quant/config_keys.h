// The keys of a `qfx ptq` / `qfx qat` config file, one table per section: the
// single source of what each section accepts (its unknown-key errors), of each
// value's type and range (its readers' checks), and of the key list that
// docs/pipelines.md documents (a test compares the two).
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace qfx::quant {

/// What a key's value is; the section readers read it accordingly.
enum class KeyType {
  kBool,     ///< true or false
  kInt,      ///< an integer (64-bit)
  kNumber,   ///< a finite number
  kString,   ///< a string
  kChoice,   ///< one string of ConfigKey::choices
  kPath,     ///< a file or folder path (${VAR} expanded, relative to where it is written)
  kPaths,    ///< a list of paths
  kList,     ///< a list (of the type the doc names)
  kMapping,  ///< a mapping: ConfigKey::keys when it has fixed keys, names of its own otherwise
  kSwitch,   ///< `true` / `false`, or a mapping of options (ConfigKey::keys) that also turns it on
  kData,     ///< a data mapping (data_source_keys), or one per model input
  kSection,  ///< a section of the file (ConfigKey::keys)
};

/// An allowed interval of a number or integer; `says` is the error's tail after
/// the key ("must be >= 1") and the docs' range.
struct KeyRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  std::string says;
  /// Whether `v` lies in the interval.
  bool contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
};

/// No bound on that side of a KeyRange.
inline constexpr double kNoBound = std::numeric_limits<double>::infinity();

/// Any value, with `says` as the error's tail (a kChoice with its own wording).
inline KeyRange saying(std::string says) { return {-kNoBound, kNoBound, false, false, std::move(says)}; }

/// An integer range [lo, +inf) saying "must be >= lo".
inline KeyRange at_least(int64_t lo) { return {static_cast<double>(lo), std::numeric_limits<double>::infinity(), false, false, "must be >= " + std::to_string(lo)}; }

struct KeyTable;

/// One key of a section.
struct ConfigKey {
  std::string name;                  ///< the key as written ("num_samples")
  KeyType type = KeyType::kString;
  std::vector<std::string> choices;  ///< kChoice: the accepted strings (empty: the reader's own list)
  KeyRange range;                    ///< kInt / kNumber: the accepted values (default: any)
  std::string default_value;         ///< as the docs show it; "required" for a required key
  std::string doc;                   ///< one line: what it sets
  const KeyTable* keys = nullptr;    ///< kMapping / kSwitch / kData / kSection: the mapping's keys
  /// Whether the key must be present in its section.
  bool required() const { return default_value == "required"; }
};

/// The keys of one section or mapping, in the order the docs list them.
struct KeyTable {
  std::string name;  ///< "calibration", "ptq.adaround", "a data source"
  std::vector<ConfigKey> keys;
  /// The key named `key`, or nullptr.
  const ConfigKey* find(const std::string& key) const;
  /// The keys' names, sorted (unknown-key errors list them).
  std::vector<std::string> names() const;
};

/// The top-level keys of a job config (model, tracer, backend, qconfig,
/// calibration, evaluation, training, ptq, output), each with its section's table.
const KeyTable& job_config_keys();
/// The keys of one data source (`calibration.data` and the other data mappings).
const KeyTable& data_source_keys();
/// The keys of a qconfig's `activation` / `weight` mapping.
const KeyTable& tensor_qconfig_keys();

/// The key of `known` closest to `key` by edit distance, when a typo is the likely
/// cause (distance at most a third of the key's length, and at least 1 allowed);
/// empty otherwise.
std::string closest_key(const std::string& key, const std::vector<std::string>& known);

}  // namespace qfx::quant
