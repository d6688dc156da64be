// report.json's entries against the types qfx writes: a hand-edited or foreign
// report.json is refused naming the entry, before anything is drawn.
#include "report_check.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "qfx/error.h"

namespace qfx::quant::report {

namespace {

using nlohmann::json;

// What report.html reads, as a JSON document of type names: "string", "number"
// (or null), "integer" (or null), "boolean", "object", "array", "any"; an object
// for an object of those keys; a one-element array for an array of such items.
const char* kSchema = R"({
  "backend": "string", "runtime_backend": "string", "model": "string", "config": "string", "seconds": "number",
  "kernels": [{"node": "string", "op": "string", "impl": "string", "dtype": "string", "folded": "boolean",
               "inputs": ["string"], "outputs": ["string"], "declined": [{"impl": "string", "reason": "string"}]}],
  "per_layer_sqnr": {"images": "integer", "layers": [{"node": "string", "value": "string",
                     "sqnr_db_fakequant": "number", "sqnr_db_int8": "number",
                     "sqnr_db_own": "number", "sqnr_db_inherited": "number"}]},
  "sensitivity": {"all_quantized_db": "number",
                  "layers": [{"layer": "string", "only_this_db": "number", "all_but_this_db": "number"}]},
  "auto_fallback": "object",
  "observers": [{"node": "string", "algorithm": "string", "observer": "string", "clip": ["number"], "min": "number",
                 "max": "number", "hist": {"lo": "number", "width": "number", "counts": ["number"]}}],
  "weights": [{"node": "string", "channels": "integer", "min": ["number"], "max": ["number"]}],
  "training": {"curve": [{"step": "number", "loss": "number", "train_accuracy": "number", "top1_fakequant": "number"}]},
  "evaluation": "object",
  "profile_int8": {"images": "integer", "nodes": [{"node": "string", "op": "string", "impl": "string", "ms_per_image": "number"}]},
  "calibration": {"images": "integer", "seconds": "number", "images_per_s": "number", "threads": "integer", "engine": "string"},
  "target_arithmetic": {"arithmetic": "object", "top1_float_requantization": "number",
                        "layers_vs_float_requantization": [{"node": "string", "codes": "integer", "differing": "integer",
                                                            "max_abs_diff": "integer"}]},
  "host_postprocess": {"nodes": ["string"]},
  "float_fallbacks": "array", "runtime_float_groups": "array", "export_float_ops": "array"
})";

const char* kind(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a fractional number";
    default: return "an integer";
  }
}

bool fits(const std::string& type, const json& v) {
  if (type == "any") return true;
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number() || v.is_null();
  if (type == "integer") return v.is_number_integer() || v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  return v.is_array();
}

std::string article(const std::string& type) {
  if (type == "integer" || type == "object" || type == "array") return "an " + type;
  return "a " + type;
}

void check(const json& schema, const json& v, const std::string& path, const std::string& source) {
  auto wrong = [&](const std::string& want) {
    throw DataError(source + ": " + path + " is " + kind(v) + "; qfx writes " + want +
                    " there (a report.json edited by hand or written by another program?)");
  };
  if (schema.is_string()) {
    if (!fits(schema.get<std::string>(), v)) wrong(article(schema.get<std::string>()));
  } else if (schema.is_array()) {
    if (!v.is_array()) wrong("an array");
    for (size_t i = 0; i < v.size(); ++i) check(schema[0], v[i], path + "[" + std::to_string(i) + "]", source);
  } else {
    if (!v.is_object()) wrong("an object");
    for (auto it = schema.begin(); it != schema.end(); ++it)
      if (v.contains(it.key())) check(it.value(), v[it.key()], path.empty() ? it.key() : path + "." + it.key(), source);
  }
}

}  // namespace

void check_report_types(const json& r, const std::string& source) {
  static const json schema = json::parse(kSchema);
  check(schema, r, "", source);
}

std::string shorten(const std::string& s, size_t max) {
  if (s.size() <= max || max < 5) return s;
  size_t head = (max - 1) / 2, from = s.size() - (max - 1 - head);
  auto continuation = [&](size_t i) { return (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; };
  while (head > 0 && continuation(head)) --head;  // whole UTF-8 characters on both sides
  while (from < s.size() && continuation(from)) ++from;
  return s.substr(0, head) + "\xE2\x80\xA6" + s.substr(from);
}

json parse_report(const std::string& text, const std::string& source) {
  json r;
  try {
    r = json::parse(text);
  } catch (const json::exception& e) {
    throw DataError(source + ": not a report.json (" + std::string(e.what()) + ")");
  }
  if (!r.is_object() || !r.contains("kernels")) throw DataError(source + ": not a report.json written by qfx ptq or qfx qat");
  check_report_types(r, source);
  return r;
}

std::string read_report_text(const std::string& output_dir, std::string* path) {
  *path = (std::filesystem::path(output_dir) / "report.json").string();
  std::ifstream f(*path);
  if (!f) throw IoError(*path + ": cannot open (missing or unreadable; qfx report takes a qfx ptq / qat output folder)");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace qfx::quant::report
