// The config key tables (qfx/quant/config_keys.h) against docs/pipelines.md's key
// lists, and the readers they drive: ranges, required keys, unknown-key hints.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "qfx/error.h"
#include "qfx/quant/config_keys.h"
#include "qfx/quant/job_config.h"

using namespace qfx::quant;

namespace {

std::vector<std::string> doc_lines() {
  std::ifstream f(std::string(QFX_SOURCE_DIR) + "/docs/pipelines.md");
  EXPECT_TRUE(f.good()) << "docs/pipelines.md";
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  return lines;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The cells of a markdown table row "| a | b |" (a "|" inside backticks stays).
std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::string cur;
  bool code = false;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '`') code = !code;
    if (row[i] == '|' && !code) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += row[i];
    }
  }
  return out;
}

// The backticked words of a cell: "`training.epochs`, `batch_size`".
std::vector<std::string> code_spans(const std::string& cell) {
  std::vector<std::string> out;
  for (size_t a = cell.find('`'); a != std::string::npos; a = cell.find('`', a + 1)) {
    const size_t b = cell.find('`', a + 1);
    if (b == std::string::npos) break;
    out.push_back(cell.substr(a + 1, b - a - 1));
    a = b;
  }
  return out;
}

// A documented row: its dotted key and its meaning cell.
struct DocKey {
  std::string key, meaning;
};

// Every key in the tables whose header's first cell is "key": a row names one key
// or several ("`training.epochs`, `batch_size`": the later ones share the first's
// section).
std::vector<DocKey> documented_keys() {
  std::vector<DocKey> out;
  bool in_table = false;
  for (const std::string& l : doc_lines()) {
    if (l.rfind("|", 0) != 0) {
      in_table = false;
      continue;
    }
    const auto c = cells(l);
    if (!in_table) {
      in_table = !c.empty() && c[0] == "key";
      continue;
    }
    if (c.empty() || c[0].rfind("---", 0) == 0) continue;
    std::string prefix;
    for (const std::string& k : code_spans(c[0])) {
      const size_t dot = k.find('.');
      if (prefix.empty() && dot != std::string::npos) prefix = k.substr(0, dot + 1);
      out.push_back({dot == std::string::npos && !prefix.empty() ? prefix + k : k, c.back()});
    }
  }
  return out;
}

std::string join(const std::set<std::string>& s) {
  std::string o;
  for (const auto& k : s) o += (o.empty() ? "" : ", ") + k;
  return o;
}

// `a` and `b` as a failure message: what each has that the other lacks.
std::string difference(const std::set<std::string>& docs, const std::set<std::string>& tables) {
  std::set<std::string> only_docs, only_tables;
  for (const auto& k : docs)
    if (!tables.count(k)) only_docs.insert(k);
  for (const auto& k : tables)
    if (!docs.count(k)) only_tables.insert(k);
  return "documented but not in the key tables: {" + join(only_docs) + "}; in the key tables but not documented: {" +
         join(only_tables) + "}";
}

std::set<std::string> names(const KeyTable& t) {
  const auto n = t.names();
  return {n.begin(), n.end()};
}

// The keys of the first backticked mapping of a meaning cell:
// "`true` or `{alpha: 0.5, num_samples: 256}`" -> {alpha, num_samples}.
std::set<std::string> inline_mapping_keys(const std::string& meaning) {
  for (const std::string& span : code_spans(meaning)) {
    if (span.empty() || span.front() != '{' || span.back() != '}') continue;
    std::set<std::string> keys;
    int depth = 0;
    std::string item;
    auto flush = [&] {
      const std::string k = trim(item.substr(0, item.find_first_of(": ")));
      if (!k.empty() && k != "...") keys.insert(k);
      item.clear();
    };
    for (size_t i = 1; i + 1 < span.size(); ++i) {
      const char ch = span[i];
      depth += (ch == '[' || ch == '{') - (ch == ']' || ch == '}');
      if (ch == ',' && depth == 0) flush();
      else item += depth == 0 && item.empty() && ch == ' ' ? std::string() : std::string(1, ch);
    }
    flush();
    return keys;
  }
  return {};
}

// The YAML code block that follows the first line containing `marker`.
std::string yaml_block_after(const std::string& marker) {
  const auto lines = doc_lines();
  std::string block;
  bool seen = false, in_block = false;
  for (const std::string& l : lines) {
    if (!seen) {
      seen = l.find(marker) != std::string::npos;
      continue;
    }
    if (!in_block) {
      in_block = l.rfind("```", 0) == 0;
      continue;
    }
    if (l.rfind("```", 0) == 0) break;
    block += l + "\n";
  }
  return block;
}

}  // namespace

// docs/pipelines.md's key tables name exactly the keys of the sections' tables:
// `section.key` rows (the PTQ, QAT and tracer tables), `tracer.*` / `qconfig.*`
// pointing to their own tables, and the top-level keys that are values.
TEST(ConfigKeys, PipelinesDocNamesExactlyTheSectionKeys) {
  std::set<std::string> docs, tables;
  for (const DocKey& d : documented_keys()) {
    const size_t dot = d.key.find('.');
    const ConfigKey* top = job_config_keys().find(d.key.substr(0, dot));
    ASSERT_NE(top, nullptr) << "docs/pipelines.md documents '" << d.key << "', whose section qfx does not read";
    if (d.key.size() > 2 && d.key.compare(d.key.size() - 2, 2, ".*") == 0) continue;  // "as above"
    if (dot == std::string::npos && top->type == KeyType::kSection) continue;           // the section itself
    if (d.key.rfind("qconfig.", 0) != 0) docs.insert(d.key);
  }
  for (const ConfigKey& top : job_config_keys().keys) {
    if (top.type != KeyType::kSection) tables.insert(top.name);
    else if (top.name != "qconfig")  // documented as YAML and its own table (QconfigDoc... below)
      for (const ConfigKey& k : top.keys->keys) tables.insert(top.name + "." + k.name);
  }
  EXPECT_EQ(docs, tables) << difference(docs, tables);
}

// The options of mapping-valued keys, as the docs write them inline
// (`ptq.adaround`: `{iterations: 1000, lr: 0.01, ...}`).
TEST(ConfigKeys, PipelinesDocNamesEveryOptionOfMappingKeys) {
  int checked = 0;
  for (const DocKey& d : documented_keys()) {
    const size_t dot = d.key.find('.');
    if (dot == std::string::npos) continue;
    const ConfigKey* top = job_config_keys().find(d.key.substr(0, dot));
    const ConfigKey* k = top && top->keys ? top->keys->find(d.key.substr(dot + 1)) : nullptr;
    if (!k || !k->keys || (k->type != KeyType::kSwitch && k->type != KeyType::kMapping)) continue;
    const std::set<std::string> docs = inline_mapping_keys(d.meaning), tables = names(*k->keys);
    EXPECT_EQ(docs, tables) << d.key << ": " << difference(docs, tables);
    ++checked;
  }
  EXPECT_GE(checked, 8) << "ptq's six switches, training.optimizer and training.lr_schedule";
}

// The data mapping examples name exactly the keys of a data source.
TEST(ConfigKeys, PipelinesDocDataMappingsNameTheSourceKeys) {
  const std::string block = yaml_block_after("Data mappings");
  ASSERT_FALSE(block.empty());
  std::set<std::string> docs;
  std::function<void(const YAML::Node&)> walk = [&](const YAML::Node& n) {
    if (!n.IsMap()) return;
    if (n["images"])
      for (const auto& kv : n) docs.insert(kv.first.Scalar());
    else
      for (const auto& kv : n) walk(kv.second);
  };
  // One example per "data:" line at the start of a line.
  std::istringstream in(block);
  std::string example;
  auto flush = [&] {
    if (!example.empty()) walk(YAML::Load(example));
    example.clear();
  };
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("data:", 0) == 0) flush();
    example += l + "\n";
  }
  flush();
  EXPECT_EQ(docs, names(data_source_keys())) << difference(docs, names(data_source_keys()));
}

// The qconfig example names the qconfig section's keys; the activation / weight
// table names exactly the tensor qconfig keys.
TEST(ConfigKeys, PipelinesDocQconfigNamesTheTableKeys) {
  const YAML::Node example = YAML::Load(yaml_block_after("| `tracer.max_unroll`"));
  ASSERT_TRUE(example["qconfig"]) << "the qconfig example after the tracer table";
  std::set<std::string> section, spec, tensor;
  for (const auto& kv : example["qconfig"]) section.insert(kv.first.Scalar());
  for (const auto& kv : example["qconfig"]["global"]) spec.insert(kv.first.Scalar());
  const ConfigKey* q = job_config_keys().find("qconfig");
  EXPECT_EQ(section, names(*q->keys)) << difference(section, names(*q->keys));
  EXPECT_EQ(spec, names(*q->keys->find("global")->keys));
  bool in_table = false;
  for (const std::string& l : doc_lines()) {
    if (l.rfind("| `qconfig.*.activation`", 0) == 0) in_table = true;
    else if (l.rfind("|", 0) != 0) in_table = false;
    else if (in_table && l.rfind("|---", 0) != 0)
      for (const auto& k : code_spans(cells(l)[0])) tensor.insert(k);
  }
  EXPECT_EQ(tensor, names(tensor_qconfig_keys())) << difference(tensor, names(tensor_qconfig_keys()));
}

namespace {

std::string load_error(const std::string& config, const std::string& override_) {
  try {
    load_job_config(std::string(QFX_SOURCE_DIR) + config, {override_});
  } catch (const qfx::ConfigError& e) {
    return e.what();
  }
  return "(loaded)";
}

}  // namespace

// Every bounded integer or number in the tables is refused just outside its
// bound, with the key and the range's wording, and accepted on it.
TEST(ConfigKeys, EveryRangeIsCheckedAsTheTableSays) {
  int checked = 0;
  std::function<void(const KeyTable&, const std::string&)> walk = [&](const KeyTable& t, const std::string& prefix) {
    for (const ConfigKey& k : t.keys) {
      const std::string name = prefix + k.name;
      if (k.keys && k.type != KeyType::kData) walk(*k.keys, name + ".");
      if ((k.type != KeyType::kInt && k.type != KeyType::kNumber) || !std::isfinite(k.range.lo)) continue;
      if (name.rfind("qconfig.", 0) == 0) continue;  // module entries have names of their own
      const std::string config = name.rfind("training.", 0) == 0 ? "/configs/qat/fashion_mobilenet.yaml" : "/configs/ptq/default.yaml";
      const double outside = k.range.lo_open ? k.range.lo : k.range.lo - 1;
      std::ostringstream v;
      v << outside;
      EXPECT_NE(load_error(config, name + "=" + v.str()).find(name + " " + k.range.says), std::string::npos)
          << name << "=" << v.str() << ": " << load_error(config, name + "=" + v.str());
      ++checked;
    }
  };
  walk(job_config_keys(), "");
  EXPECT_GE(checked, 20);
  EXPECT_EQ(load_error("/configs/ptq/default.yaml", "calibration.seed=-1"), "(loaded)");
  EXPECT_EQ(load_error("/configs/ptq/default.yaml", "evaluation.sqnr_samples=0"), "(loaded)");
}

// An unknown key names the closest known one when it looks like a typo, at every level.
TEST(ConfigKeys, UnknownKeysSuggestTheClosest) {
  EXPECT_NE(load_error("/configs/ptq/default.yaml", "calibraton.num_samples=3").find("unknown key 'calibraton' in the config"),
            std::string::npos);
  EXPECT_NE(load_error("/configs/ptq/default.yaml", "calibraton.num_samples=3").find("did you mean 'calibration'?"),
            std::string::npos);
  EXPECT_NE(load_error("/configs/ptq/default.yaml", "calibration.num_sample=3").find("did you mean 'num_samples'?"),
            std::string::npos);
  EXPECT_NE(load_error("/configs/ptq/default.yaml", "ptq.adaround={iteratoins: 5}").find("did you mean 'iterations'?"),
            std::string::npos);
  EXPECT_NE(load_error("/configs/ptq/default.yaml", "qconfig.global.weight.bitz=4").find("did you mean 'bits'?"), std::string::npos);
  EXPECT_EQ(load_error("/configs/ptq/default.yaml", "calibration.colour=3").find("did you mean"), std::string::npos)
      << "no suggestion for a key unlike every known one";
  EXPECT_EQ(closest_key("wrapp", {"max_unroll", "use_model_annotations", "wrap"}), "wrap");
  EXPECT_EQ(closest_key("smothquant", {"smoothquant", "sensitivity"}), "smoothquant");
  EXPECT_EQ(closest_key("xyz", {"seed", "device"}), "");
}

// A required key of a table is required in the file, at the mapping's position.
TEST(ConfigKeys, RequiredKeysComeFromTheTables) {
  EXPECT_NE(load_error("/configs/ptq/default.yaml", "calibration.data={format: idx}").find("calibration.data.images is required"),
            std::string::npos);
  EXPECT_NE(load_error("/configs/ptq/default.yaml", "evaluation={num_samples: 3}").find("evaluation.data is required"),
            std::string::npos);
  EXPECT_NE(load_error("/configs/ptq/default.yaml", "model={input_shape: [-1, 1, 28, 28]}").find("model.path is required"),
            std::string::npos);
}
