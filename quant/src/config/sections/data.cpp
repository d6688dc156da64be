// Data mappings (calibration.data, evaluation.data, training.data,
// ptq.auto_fallback.data): one source, or one per model input.
#include <filesystem>

#include "sections.h"

namespace qfx::quant {

const KeyTable& data_source_keys() {
  static const KeyTable t{"a data source", {
      {"format", KeyType::kChoice, {}, {}, "idx", "the reader: idx, images, npy or raw (data_reader_formats)"},
      {"images", KeyType::kPath, {}, {}, "required", "the samples: a file or folder"},
      {"labels", KeyType::kString, {}, {}, "none", "a label file, or `subfolders` for an image folder"},
      {"mean", KeyType::kList, {}, {}, "0", "subtracted: one value or one per channel"},
      {"std", KeyType::kList, {}, {}, "1", "divided by: one positive value or one per channel"},
      {"resize", KeyType::kInt, {}, at_least(0), "0", "images: the shorter side, antialiased bilinear (0: keep)"},
      {"crop", KeyType::kInt, {}, at_least(0), "0", "images: center crop (0: none)"},
      {"color", KeyType::kChoice, {"rgb", "bgr", "gray"}, {}, "rgb", "images: channel order, or gray (ITU-R 601 luma)"},
  }};
  return t;
}

namespace sections {
namespace {

using namespace yaml;

// The labels of source `s` of format `format` (a path, or `subfolders` for images).
std::string read_labels(const SectionReader& s, const std::string& format) {
  const YAML::Node l = s["labels"];
  const std::string v = as_string(s.path(), l, s.what("labels"));
  if (format == "images" && v != "subfolders") bad(s.path(), l, s.what("labels") + " of an image folder must be 'subfolders'");
  if (format == "raw") bad(s.path(), l, s.what("labels") + ": raw data has no labels");
  return format == "images" ? v : read_path(s.path(), l, s.what("labels"), s.base());
}

DataSpec read_source(const std::string& path, const YAML::Node& n, const std::string& what) {
  DataSpec d;
  if (!n.IsMap()) bad(path, n, what + " must be a mapping {format: ..., images: ...}");
  const SectionReader s(path, n, what, data_source_keys());
  if (auto f = s["format"]) d.format = as_choice(path, f, s.what("format"), data_reader_formats());
  s.read("images", &d.images);
  if (s["labels"]) d.labels = read_labels(s, d.format);
  if (auto m = s["mean"]) d.mean = read_doubles(path, m, s.what("mean"));
  if (auto sd = s["std"]) {
    d.std = read_doubles(path, sd, s.what("std"));
    for (double x : d.std)
      if (!(x > 0)) bad(path, sd, s.what("std") + " must be positive");
  }
  const bool image_keys = s["resize"] || s["crop"] || s["color"];
  if (image_keys && d.format != "images") bad(path, n, what + ": resize, crop and color apply to format: images only");
  s.read("resize", &d.resize);
  s.read("crop", &d.crop);
  s.read("color", &d.color);
  return d;
}

// One source per input: every key names an input, every input has a source.
DataSpec read_per_input(const std::string& path, const YAML::Node& n, const std::string& what, const std::vector<InputSpec>& inputs,
                        const std::string& names) {
  DataSpec d;
  for (const auto& kv : n) {
    const std::string key = key_name(path, kv.first, what);
    bool known = false;
    for (const auto& in : inputs) known |= in.name == key;
    if (!known) bad(path, kv.first, what + "." + key + ": the model has no input '" + key + "' (its inputs: " + names + ")");
  }
  for (const auto& in : inputs) {
    if (!n[in.name]) bad(path, n, what + ": no source for the model's input '" + in.name + "'");
    d.inputs.push_back(read_source(path, n[in.name], what + "." + in.name));
    d.inputs.back().input = in.name;
  }
  int labelled = 0;
  for (const auto& s : d.inputs) labelled += !s.labels.empty();
  if (labelled > 1) bad(path, n, what + ": labels are given for several inputs; give them in one input's source");
  for (const auto& s : d.inputs)
    if (!s.labels.empty()) d.labels = s.labels;  // the section's labels, for the checks that need them
  return d;
}

}  // namespace

DataSpec read_data(const std::string& path, const YAML::Node& n, const std::string& what, const std::vector<InputSpec>& inputs) {
  bool named = n.IsMap() && !n["images"] && !n["format"];
  if (named) {
    named = inputs.size() > 1;
    for (const auto& in : inputs) named |= static_cast<bool>(n[in.name]);
  }
  std::string names;
  for (const auto& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
  if (named) return read_per_input(path, n, what, inputs, names);
  if (inputs.size() > 1)
    bad(path, n, what + ": the model has " + std::to_string(inputs.size()) + " inputs (" + names +
                     "): give one source per input, {" + inputs[0].name + ": {format: npy, images: ...}, ...}");
  return read_source(path, n, what);
}

void read_samples(const SectionReader& s, const JobConfig& c, bool* enabled, DataSpec* data, int64_t* num_samples,
                  int64_t* batch_size) {
  *enabled = true;
  *data = read_data(s.path(), s["data"], s.what("data"), c.model.inputs);
  s.read("num_samples", num_samples);
  s.read("batch_size", batch_size);
}

}  // namespace sections
}  // namespace qfx::quant
