// The evaluation description's renderers: the view (from a run or a report.json),
// report.json's object, console lines and page values.
#include <cstdio>
#include <map>
#include <stdexcept>

#include "html.h"
#include "qfx/quant/evaluation_view.h"

namespace qfx::quant {

namespace {

using nlohmann::json;

const EvaluationField& field_named(const std::string& key) {
  static const std::map<std::string, const EvaluationField*> by_key = [] {
    std::map<std::string, const EvaluationField*> m;
    for (const auto& f : evaluation_fields()) m[f.key] = &f;
    return m;
  }();
  const auto it = by_key.find(key);
  if (it == by_key.end()) throw std::logic_error("evaluation description: no field '" + key + "'");
  return *it->second;
}

void add_derived(json* view) {
  for (const auto& f : evaluation_fields())
    if (f.derive)
      if (json v = f.derive(*view); !v.is_null()) (*view)[f.key] = std::move(v);
}

std::string console_value(const EvaluationField& f, const json& v) {
  char b[96];
  switch (f.unit) {
    case ResultUnit::kCount: std::snprintf(b, sizeof b, f.console.c_str(), static_cast<long long>(v.get<int64_t>())); break;
    case ResultUnit::kText: return v.is_string() ? v.get<std::string>() : v.dump();
    case ResultUnit::kFlag: return v.dump();
    case ResultUnit::kFraction: std::snprintf(b, sizeof b, f.console.c_str(), 100 * v.get<double>()); break;
    default: std::snprintf(b, sizeof b, f.console.c_str(), v.get<double>());
  }
  return b;
}

std::string page_text(const EvaluationField& f, const json& v) {
  switch (f.unit) {
    case ResultUnit::kFraction: return report::num(100.0 * v.get<double>(), f.digits) + " %";
    case ResultUnit::kDb: return report::num(v.get<double>(), f.digits) + " dB";
    case ResultUnit::kCount: return std::to_string(v.get<int64_t>());
    case ResultUnit::kText: return v.is_string() ? v.get<std::string>() : v.dump();
    case ResultUnit::kFlag: return v.dump();
    default: return report::num(v.get<double>(), f.digits);
  }
}

// `text` with each {KEY} replaced by format(KEY); "" when a field is absent from `values`.
template <typename Format>
std::string lay_out(const std::string& text, const json& values, const std::string& prefix, Format&& format) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const size_t end = text[i] == '{' ? text.find('}', i) : std::string::npos;
    if (end == std::string::npos) {
      out += text[i];
      continue;
    }
    const std::string key = text.substr(i + 1, end - i - 1);
    if (!values.contains(key)) return "";
    out += format(field_named(prefix + key), values[key]);
    i = end;
  }
  return out;
}

bool numbers_where_expected(const EvaluationField& f, const json& v) {
  if (f.unit == ResultUnit::kText || f.unit == ResultUnit::kFlag || f.unit == ResultUnit::kList) return true;
  return v.is_number();
}

}  // namespace

json evaluation_view(const PtqEvaluation& E, const std::string& runtime_backend) {
  json view = json::object();
  for (const auto& f : evaluation_fields())
    if (f.get)
      if (json v = f.get(E); !v.is_null()) view[f.key] = std::move(v);
  view["runtime_backend"] = runtime_backend;
  add_derived(&view);
  return view;
}

json evaluation_view_from_report(const json& report) {
  json view = json::object();
  const json e = report.is_object() && report.contains("evaluation") ? report["evaluation"] : json::object();
  if (!e.is_object()) return view;
  for (auto it = e.begin(); it != e.end(); ++it) {
    if (!it.value().is_object()) {
      view[it.key()] = it.value();
      continue;
    }
    for (auto in = it.value().begin(); in != it.value().end(); ++in) view[it.key() + "." + in.key()] = in.value();
  }
  if (report.contains("runtime_backend")) view["runtime_backend"] = report["runtime_backend"];
  for (const auto& f : evaluation_fields())  // a value of another type is left out, not drawn wrongly
    if (view.contains(f.key) && !numbers_where_expected(f, view[f.key])) view.erase(f.key);
  add_derived(&view);
  return view;
}

json evaluation_report_json(const json& view) {
  json j = json::object();
  for (const auto& f : evaluation_fields()) {
    if (!f.get || !view.contains(f.key)) continue;
    const size_t dot = f.key.find('.');
    if (dot == std::string::npos) j[f.key] = view[f.key];
    else j[f.key.substr(0, dot)][f.key.substr(dot + 1)] = view[f.key];
  }
  return j;
}

std::vector<std::string> render_console(const std::vector<EvaluationLine>& lines, const json& view) {
  std::vector<std::string> out;
  for (const auto& l : lines) {
    if (!view.contains(l.when)) continue;
    if (l.min_items == 0) {
      if (std::string s = lay_out(l.text, view, "", console_value); !s.empty()) out.push_back(std::move(s));
      continue;
    }
    const json& items = view[l.when];
    if (!items.is_array() || items.size() < l.min_items) continue;
    for (const auto& item : items)
      if (std::string s = lay_out(l.text, item, l.when + ".", console_value); !s.empty()) out.push_back(std::move(s));
  }
  return out;
}

std::string page_value(const json& view, const std::string& key) {
  return view.contains(key) ? page_text(field_named(key), view[key]) : "-";
}

std::string render_page_text(const EvaluationLine& line, const json& view) { return lay_out(line.text, view, "", page_text); }

}  // namespace qfx::quant
