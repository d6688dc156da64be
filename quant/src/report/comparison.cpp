// `qfx report DIR1 DIR2 ...`: several runs of one model side by side, as a text
// table and as one self-contained page.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "html.h"
#include "qfx/atomic_file.h"
#include "qfx/error.h"
#include "qfx/quant/evaluation_view.h"
#include "qfx/quant/report.h"
#include "report_check.h"

namespace qfx::quant {

namespace {

using nlohmann::json;

// One run: its folder, the name it goes by in the tables, its report.json.
struct Run {
  std::string dir, name;
  json report, view;
};

Run read_run(const std::string& dir) {
  std::string in;
  const std::string text = report::read_report_text(dir, &in);
  Run r{dir, std::filesystem::path(dir).lexically_normal().filename().string(), report::parse_report(text, in), {}};
  r.view = evaluation_view_from_report(r.report);
  return r;
}

// Folder names, or whole paths where two folders share a name.
void name_runs(std::vector<Run>& runs) {
  std::map<std::string, int> seen;
  for (const auto& r : runs) seen[r.name]++;
  for (auto& r : runs)
    if (r.name.empty() || seen[r.name] > 1) r.name = r.dir;
}

// A table: a header row and rows of cells, the first cell a label.
using Table = std::vector<std::vector<std::string>>;

// Headline rows: where each run ran, then every evaluation field any run has.
Table metric_rows(const std::vector<Run>& runs) {
  Table t;
  auto add = [&](const std::string& label, auto cell) {
    std::vector<std::string> row{label};
    bool any = false;
    for (const auto& r : runs) {
      row.push_back(cell(r));
      any |= row.back() != "-" && !row.back().empty();
    }
    if (any) t.push_back(row);
  };
  add("backend", [&](const Run& r) { return report::get<std::string>(r.report, "backend", "-"); });
  add("int8 kernels / all", [](const Run& r) {
    int q = 0, all = 0;
    for (const auto& k : report::get<json>(r.report, "kernels", json::array())) {
      if (report::get<bool>(k, "folded", false)) continue;
      ++all;
      q += report::get<std::string>(k, "dtype", "").find("int") != std::string::npos;
    }
    return std::to_string(q) + " / " + std::to_string(all);
  });
  std::vector<std::string> lists;  // a list's items have no single value per run
  for (const auto& f : evaluation_fields())
    if (f.unit == ResultUnit::kList) lists.push_back(f.key);
  for (const auto& f : evaluation_fields()) {
    const std::string parent = f.key.substr(0, f.key.find('.'));
    if (std::find(lists.begin(), lists.end(), parent) == lists.end())
      add(f.unit == ResultUnit::kMs ? f.label + " (ms per image)" : f.label, [&](const Run& r) { return page_value(r.view, f.key); });
  }
  return t;
}

// A layer's deployed SQNR in one run (int8 where the value is int8, else fake-quant).
double layer_db(const json& l) {
  const json& v = l.contains("sqnr_db_int8") && l["sqnr_db_int8"].is_number() ? l["sqnr_db_int8"] : l["sqnr_db_fakequant"];
  return v.is_number() ? v.get<double>() : NAN;
}

// Per-layer SQNR side by side, the layers whose SQNR differs most between the runs first.
Table layer_rows(const std::vector<Run>& runs) {
  std::map<std::string, std::vector<double>> by_node;
  for (size_t i = 0; i < runs.size(); ++i) {
    const json p = report::get<json>(runs[i].report, "per_layer_sqnr", json::object());
    for (const auto& l : report::get<json>(p, "layers", json::array())) {
      auto& v = by_node.try_emplace(report::get<std::string>(l, "node", "?"), runs.size(), NAN).first->second;
      v[i] = layer_db(l);
    }
  }
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [node, v] : by_node) {
    double lo = INFINITY, hi = -INFINITY;
    for (double d : v)
      if (!std::isnan(d)) lo = std::min(lo, d), hi = std::max(hi, d);
    order.push_back({hi >= lo ? hi - lo : 0.0, node});
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  Table t;
  for (const auto& [spread, node] : order) {
    std::vector<std::string> row{node};
    for (double d : by_node[node]) row.push_back(std::isnan(d) ? "-" : report::num(d, 4) + " dB");
    row.push_back(report::num(spread, 3) + " dB");
    t.push_back(row);
  }
  return t;
}

std::string text_table(const std::vector<std::string>& header, const Table& rows, size_t max_rows) {
  std::vector<size_t> w(header.size(), 0);
  auto widen = [&](const std::vector<std::string>& r) {
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], std::min<size_t>(r[c].size(), c == 0 ? 44 : 24));
  };
  widen(header);
  for (size_t i = 0; i < rows.size() && i < max_rows; ++i) widen(rows[i]);
  auto line = [&](const std::vector<std::string>& r) {
    std::string s = " ";
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) {
      std::string cell = report::shorten(r[c], w[c]);
      cell.resize(std::max(cell.size(), w[c]), ' ');
      s += " " + cell;
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string s = line(header);
  for (size_t i = 0; i < rows.size() && i < max_rows; ++i) s += line(rows[i]);
  if (rows.size() > max_rows) s += "  ... " + std::to_string(rows.size() - max_rows) + " more in the page\n";
  return s;
}

std::string html_table(const std::vector<std::string>& header, const Table& rows) {
  std::string s = "<table><tr>";
  for (const auto& h : header) s += "<th>" + report::esc(h) + "</th>";
  s += "</tr>";
  for (const auto& r : rows) {
    s += "<tr>";
    for (const auto& c : r) s += "<td>" + report::esc(c) + "</td>";
    s += "</tr>";
  }
  return s + "</table>";
}

std::string page(const std::vector<Run>& runs, const std::vector<std::string>& header, const Table& metrics,
                 const std::vector<std::string>& layer_header, const Table& layers) {
  std::string s =
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>qfx report: comparison</title><style>"
      "body{font-family:sans-serif;margin:20px;color:#222}table{border-collapse:collapse;margin:8px 0}"
      "td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;font-size:13px}th{background:#f4f4f4}</style></head>"
      "<body><h1>qfx report: " + std::to_string(runs.size()) + " runs side by side</h1><ul>";
  for (const auto& r : runs)
    s += "<li><b>" + report::esc(r.name) + "</b>: " + report::esc(r.dir) + " (model " +
         report::esc(report::get<std::string>(r.report, "model", "?")) + ", config " +
         report::esc(report::get<std::string>(r.report, "config", "?")) + ")</li>";
  s += "</ul><h2>Results</h2>" + html_table(header, metrics);
  s += "<h2>Per-layer SQNR (int8 where deployed in int8, else fake-quant), most different first</h2>";
  s += layers.empty() ? "<p>No run measured per-layer SQNR (evaluation.sqnr_samples: 0).</p>" : html_table(layer_header, layers);
  return s + "</body></html>\n";
}

}  // namespace

std::string compare_reports(const std::vector<std::string>& output_dirs, const std::string& html_path) {
  if (output_dirs.size() < 2) throw ConfigError("qfx report compares two or more output folders; one folder gives its report.html");
  std::vector<Run> runs;
  for (const auto& d : output_dirs) runs.push_back(read_run(d));
  name_runs(runs);
  std::vector<std::string> header{""}, layer_header{"layer"};
  for (const auto& r : runs) header.push_back(r.name), layer_header.push_back(r.name);
  layer_header.push_back("spread");
  const Table metrics = metric_rows(runs), layers = layer_rows(runs);
  std::string text = text_table(header, metrics, metrics.size());
  std::map<std::string, int> models;
  for (const auto& r : runs) models[std::filesystem::path(report::get<std::string>(r.report, "model", "")).filename().string()]++;
  if (models.size() > 1) text += "note: the runs quantize different models; per-layer rows match by node name\n";
  if (!layers.empty()) text += "per-layer SQNR, most different first:\n" + text_table(layer_header, layers, 15);
  if (!html_path.empty()) write_file_atomic(html_path, page(runs, header, metrics, layer_header, layers));
  return text;
}

}  // namespace qfx::quant
