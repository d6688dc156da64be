#include "section_reader.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "qfx/quant/job_config.h"

namespace qfx::quant {

using namespace yaml;

const ConfigKey* KeyTable::find(const std::string& key) const {
  for (const auto& k : keys)
    if (k.name == key) return &k;
  return nullptr;
}

std::vector<std::string> KeyTable::names() const {
  std::vector<std::string> n;
  for (const auto& k : keys) n.push_back(k.name);
  std::sort(n.begin(), n.end());
  return n;
}

namespace {

// Levenshtein distance (insertions, deletions, substitutions), and a swap of two
// neighbouring letters counted as one edit (Damerau's "optimal string alignment").
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_key(const std::string& key, const std::vector<std::string>& known) {
  const size_t allowed = std::max<size_t>(1, key.size() / 3);
  std::string best;
  size_t best_d = allowed + 1;
  for (const auto& k : known) {
    const size_t d = edit_distance(key, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

SectionReader::SectionReader(std::string path, const YAML::Node& node, std::string what, const KeyTable& table)
    : path_(std::move(path)), node_(node), what_(std::move(what)), table_(table) {
  const std::vector<std::string> names = table.names();
  check_keys(path_, node_, what_, std::set<std::string>(names.begin(), names.end()));
  for (const auto& k : table.keys)
    if (k.required() && !node_[k.name]) bad(path_, node_, this->what(k.name) + " is required");
}

YAML::Node SectionReader::operator[](const std::string& key) const {
  this->key(key);
  return node_[key];
}

std::string SectionReader::base() const { return std::filesystem::path(path_).parent_path().string(); }

const ConfigKey& SectionReader::key(const std::string& name) const {
  const ConfigKey* k = table_.find(name);
  if (!k) throw std::logic_error("config reader: '" + name + "' is not in the key table of " + table_.name);
  return *k;
}

const ConfigKey& SectionReader::typed(const std::string& name, KeyType type) const {
  const ConfigKey& k = key(name);
  if (k.type != type) throw std::logic_error("config reader: " + what(name) + " is read with a type its table does not give it");
  return k;
}

void SectionReader::read(const std::string& key, bool* out) const {
  typed(key, KeyType::kBool);
  if (const YAML::Node n = node_[key]) *out = as_bool(path_, n, what(key));
}

void SectionReader::read(const std::string& key, int64_t* out) const {
  const ConfigKey& k = typed(key, KeyType::kInt);
  const YAML::Node n = node_[key];
  if (!n) return;
  const int64_t v = as_int(path_, n, what(key));
  if (!k.range.contains(static_cast<double>(v))) bad(path_, n, what(key) + " " + k.range.says);
  *out = v;
}

void SectionReader::read(const std::string& key, double* out) const {
  const ConfigKey& k = typed(key, KeyType::kNumber);
  const YAML::Node n = node_[key];
  if (!n) return;
  const double v = as_double(path_, n, what(key));
  if (!k.range.contains(v)) bad(path_, n, what(key) + " " + k.range.says);
  *out = v;
}

void SectionReader::read(const std::string& key, std::string* out) const {
  const ConfigKey& k = this->key(key);
  const YAML::Node n = node_[key];
  if (!n) return;
  if (k.type == KeyType::kPath) {
    *out = read_path(path_, n, what(key), base());
  } else if (k.type == KeyType::kChoice && !k.range.says.empty()) {
    const std::string v = as_string(path_, n, what(key));
    if (std::find(k.choices.begin(), k.choices.end(), v) == k.choices.end())
      bad(path_, n, what(key) + " " + k.range.says + ", got '" + v + "'");
    *out = v;
  } else if (k.type == KeyType::kChoice) {
    *out = as_choice(path_, n, what(key), k.choices);
  } else {
    typed(key, KeyType::kString);
    *out = as_string(path_, n, what(key));
  }
}

std::string read_path(const std::string& path, const YAML::Node& n, const std::string& what, const std::string& base) {
  const std::string v = as_string(path, n, what);
  if (v.empty()) bad(path, n, what + " must not be empty (a file or folder path)");
  std::string p;
  try {
    p = resolve_path(v, base);
  } catch (const ConfigError& e) {
    bad(path, n, what + ": " + e.what());
  }
  if (p.size() >= 4096) bad(path, n, what + " is " + std::to_string(p.size()) + " bytes long; paths are limited to 4095");
  for (const auto& part : std::filesystem::path(p))
    if (part.native().size() > 255)
      bad(path, n, what + ": the path component '" + part.native().substr(0, 40) + "...' is " +
                       std::to_string(part.native().size()) + " bytes; file systems allow at most 255");
  return p;
}

std::vector<double> read_doubles(const std::string& path, const YAML::Node& n, const std::string& what) {
  std::vector<double> v;
  if (n.IsSequence()) {
    for (const auto& e : n) v.push_back(as_double(path, e, what));
    if (v.empty()) bad(path, n, what + " must not be empty");
  } else {
    v.push_back(as_double(path, n, what));
  }
  return v;
}

}  // namespace qfx::quant
