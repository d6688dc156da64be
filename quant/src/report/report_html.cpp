// report.html: report.json drawn as one self-contained page.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "charts.h"
#include "graph.h"
#include "html.h"
#include "report_check.h"
#include "qfx/atomic_file.h"
#include "qfx/error.h"
#include "qfx/quant/evaluation_view.h"
#include "qfx/quant/report.h"
#include "qfx/runtime/arithmetic.h"

namespace qfx::quant {

namespace {

using nlohmann::json;
using report::esc;
using report::num;

const char* kStyle = R"(
body{font-family:Helvetica,Arial,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#2d3e50;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}header .src{opacity:.8;font-size:12px}
main{padding:8px 24px 40px}section{background:#fff;border:1px solid #ddd;border-radius:6px;margin:14px 0;padding:10px 16px}
h2{font-size:16px;margin:6px 0 10px}table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #eee;padding:3px 10px;text-align:left}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:150px}
.card .v{font-size:20px;font-weight:bold}.card .k{font-size:12px;color:#666}
.graphwrap{display:flex;gap:12px;align-items:flex-start}#graph{overflow:auto;max-height:900px;flex:1;border:1px solid #eee}
#panel{width:320px;font-size:13px;border:1px solid #ddd;border-radius:6px;padding:8px;position:sticky;top:8px;white-space:pre-wrap}
#graph g.node{cursor:pointer}.legend span{display:inline-block;padding:2px 8px;margin:2px;border-radius:4px;font-size:12px}
svg text{font-size:11px;font-family:Helvetica,Arial,sans-serif}svg text.small{font-size:10px;fill:#555}
rect.bar.fq{fill:#9ecae1}rect.bar.int8{fill:#3182bd}rect.hbar{fill:#6b8fb3}line.clip{stroke:#d62728;stroke-width:2}
line.obs{stroke:#999;stroke-dasharray:3,2}line.wch{stroke:#3182bd;stroke-width:1.5}line.axis{stroke:#bbb}rect.frame{fill:none;stroke:#ccc}
.grid{display:flex;flex-wrap:wrap;gap:10px}.hcard{border:1px solid #eee;border-radius:6px;padding:6px;font-size:12px}
.hcard .t{font-weight:bold;word-break:break-all;max-width:300px}.note{color:#8a6d3b;background:#fcf8e3;padding:6px 10px;border-radius:4px}
)";

const char* kScript = R"(
(function () {
  var errors = 0;
  window.addEventListener('error', function () { errors++; document.body.setAttribute('data-errors', String(errors)); });
  var data = JSON.parse(document.getElementById('qfx-data').textContent);
  var panel = document.getElementById('panel');
  function show(name) {
    var k = data.kernels[name];
    if (!panel) return;
    if (!k) { panel.textContent = name; return; }
    var t = k.node + '\n' + k.op + ' on ' + k.impl + ' (' + k.dtype + ')';
    if (k.sqnr_fq !== undefined) t += '\nSQNR fake-quant ' + k.sqnr_fq.toFixed(2) + ' dB';
    if (k.sqnr_int8 !== undefined) t += '\nSQNR int8 ' + k.sqnr_int8.toFixed(2) + ' dB';
    if (k.sqnr_own !== undefined) t += '\nown error ' + k.sqnr_own.toFixed(2) + ' dB, inherited ' +
                                      (k.sqnr_inherited === null ? 'none' : k.sqnr_inherited.toFixed(2) + ' dB');
    if (k.clip) t += '\nclipping range ' + k.clip[0] + ' .. ' + k.clip[1] + ' (' + k.algorithm + ')';
    (k.declined || []).forEach(function (d) { t += '\ndeclined by ' + d.impl + ': ' + d.reason; });
    panel.textContent = t;
  }
  document.querySelectorAll('#graph g.node').forEach(function (g) {
    g.addEventListener('click', function () { show(g.id.replace(/^gnode-/, '')); });
  });
  var f = document.getElementById('hist-filter');
  if (f) f.addEventListener('input', function () {
    var q = f.value.toLowerCase();
    document.querySelectorAll('.hcard').forEach(function (c) {
      c.style.display = c.getAttribute('data-name').toLowerCase().indexOf(q) >= 0 ? '' : 'none';
    });
  });
  document.body.setAttribute('data-errors', String(errors));
  document.body.setAttribute('data-ready', '1');
})();
)";

std::string card(const std::string& k, const std::string& v) {
  return "<div class=\"card\"><div class=\"v\">" + esc(v) + "</div><div class=\"k\">" + esc(k) + "</div></div>";
}

std::string pct(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? num(100.0 * j[key].get<double>(), 4) + " %" : "-";
}

// A number of `j`, or NaN (drawn as "nan") where it is absent or null.
double number(const json& j, const char* key) { return report::get<double>(j, key, std::nan("")); }

std::string row(const std::string& k, const std::string& v) { return "<tr><th>" + esc(k) + "</th><td>" + esc(v) + "</td></tr>"; }

std::string scalar(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// A table of a JSON object's scalar entries (nested ones as compact JSON).
std::string kv_table(const json& o) {
  std::string s = "<table>";
  for (auto it = o.begin(); it != o.end(); ++it) {
    std::string v = scalar(it.value());
    if (v.size() > 300) v = v.substr(0, 300) + "...";
    s += row(it.key(), v);
  }
  return s + "</table>";
}

std::string summary(const json& r) {
  std::string s = "<section id=\"summary\"><h2>Summary</h2><div class=\"cards\">";
  s += card("backend (runtime)", report::get<std::string>(r, "backend", std::string("?")) + " (" +
                                     report::get<std::string>(r, "runtime_backend", std::string("?")) + ")");
  const json view = evaluation_view_from_report(r);
  for (const auto& f : evaluation_fields())
    if (f.card && view.contains(f.key)) s += card(f.label, page_value(view, f.key));
  if (r.contains("seconds")) s += card("whole run", num(number(r, "seconds"), 3) + " s");
  return s + "</div></section>";
}

// The kernels by node, with their SQNR and clipping range: the side panel's data.
json panel_data(const json& r) {
  json ks = json::object();
  for (const auto& k : report::get<nlohmann::json>(r, "kernels", json::array()))
    ks[report::get<std::string>(k, "node", std::string("?"))] = {
        {"node", report::get<std::string>(k, "node", std::string("?"))},
        {"op", report::get<std::string>(k, "op", std::string("?"))},
        {"impl", report::get<std::string>(k, "impl", std::string("?"))},
        {"dtype", report::get<std::string>(k, "dtype", std::string(""))},
        {"declined", report::get<nlohmann::json>(k, "declined", json::array())}};
  for (const auto& [n, l] : report::sqnr_by_node(r)) {
    ks[n]["sqnr_fq"] = report::get<double>(l, "sqnr_db_fakequant", 0.0);
    if (l.contains("sqnr_db_int8") && l["sqnr_db_int8"].is_number()) ks[n]["sqnr_int8"] = l["sqnr_db_int8"];
    if (l.contains("sqnr_db_own") && l["sqnr_db_own"].is_number()) {
      ks[n]["sqnr_own"] = l["sqnr_db_own"];
      ks[n]["sqnr_inherited"] = report::get<nlohmann::json>(l, "sqnr_db_inherited", nullptr);
    }
  }
  for (const auto& o : report::get<nlohmann::json>(r, "observers", json::array())) {
    const std::string n = report::get<std::string>(o, "node", std::string(""));
    if (!ks.contains(n)) continue;
    ks[n]["clip"] = report::get<nlohmann::json>(o, "clip", json::array());
    ks[n]["algorithm"] = report::get<std::string>(o, "algorithm", std::string(""));
  }
  return {{"kernels", ks}};
}

std::string graph_section(const json& r) {
  std::string s = "<section id=\"graph-section\"><h2>Graph: what each node runs as</h2><div class=\"legend\">";
  std::map<std::string, std::string> seen;  // legend entry -> colour
  for (const auto& k : report::get<nlohmann::json>(r, "kernels", json::array())) {
    if (report::get<bool>(k, "folded", false)) continue;
    const std::string op = report::get<std::string>(k, "op", std::string("")),
                      impl = report::get<std::string>(k, "impl", std::string("")),
                      dtype = report::get<std::string>(k, "dtype", std::string(""));
    const std::string c = report::node_colour(op, impl, dtype);
    const bool integer = dtype == "uint8" || dtype == "int8" || dtype == "int16" || dtype == "int32";
    seen[c == "#edc948" ? "table (LUT)" : integer ? "int8 on " + impl : "float"] = c;
  }
  if (r.contains("host_postprocess")) seen["host post-processing (float)"] = "#f1ce63";
  for (const auto& [k, c] : seen) s += "<span style=\"background:" + c + "\">" + esc(k) + "</span>";
  s += "</div>";
  std::string why;
  const size_t n = report::get<nlohmann::json>(r, "kernels", json::array()).size();
  std::string svg = n <= 4000 ? report::layout_svg(report::graph_dot(r), &why) : std::string();
  if (n > 4000) why = std::to_string(n) + " nodes are too many to lay out: the graph is shown as a table";
  if (!why.empty()) s += "<p class=\"note\">" + esc(why) + "</p>";
  s += "<div class=\"graphwrap\"><div id=\"graph\">";
  if (!svg.empty()) {
    s += svg;
  } else {
    s += "<table><tr><th>node</th><th>op</th><th>runs on</th><th>dtype</th></tr>";
    for (const auto& k : report::get<nlohmann::json>(r, "kernels", json::array()))
      s += "<tr><td>" + esc(report::get<std::string>(k, "node", std::string(""))) + "</td><td>" +
           esc(report::get<std::string>(k, "op", std::string(""))) + "</td><td>" +
           esc(report::get<std::string>(k, "impl", std::string(""))) + "</td><td>" +
           esc(report::get<std::string>(k, "dtype", std::string(""))) + "</td></tr>";
    s += "</table>";
  }
  return s +
         "</div><div id=\"panel\">Click a node for its kernel, SQNR, clipping range and the kernels that declined "
         "it.</div></div></section>";
}

// Each layer's fake-quant error split into its own part and the inherited part,
// worst first, with which one dominates; "" when the report has no split.
std::string error_split_table(const json& layers) {
  std::string rows;
  for (const auto& l : layers) {
    if (!l.contains("sqnr_db_own") || !l["sqnr_db_own"].is_number()) continue;
    const double own = l["sqnr_db_own"].get<double>();
    const json inh = report::get<nlohmann::json>(l, "sqnr_db_inherited", nullptr);
    const bool inherits_more = inh.is_number() && inh.get<double>() < own;  // lower SQNR: more noise
    rows += "<tr><td>" + esc(report::get<std::string>(l, "node", std::string("?"))) + "</td><td>" +
            num(report::get<double>(l, "sqnr_db_fakequant", 0.0), 4) + " dB</td><td>" + num(own, 4) + " dB</td><td>" +
            (inh.is_number() ? num(inh.get<double>(), 4) + " dB" : std::string("none")) + "</td><td>" +
            (inherits_more ? "upstream layers" : "this layer") + "</td></tr>";
  }
  if (rows.empty()) return "";
  return "<h2>Own and inherited error</h2><p>Each layer fed the float model's values (its own error: its weights and the "
         "rounding of its inputs and output) and the fake-quant value against that (the error its quantized inputs bring "
         "from upstream). Where upstream dominates, fixing this layer does not help: look at the layers before it.</p>"
         "<table><tr><th>layer</th><th>fake-quant</th><th>own</th><th>inherited</th><th>most error from</th></tr>" +
         rows + "</table>";
}

std::string sqnr_section(const json& r) {
  std::string s = "<section id=\"sqnr\"><h2>Per-layer SQNR (worst first)</h2>";
  if (!r.contains("per_layer_sqnr"))
    return s + "<p class=\"note\">Not measured in this run (evaluation.sqnr_samples: 0, or no evaluation).</p></section>";
  const json& p = r["per_layer_sqnr"];
  s += "<p>Each quantized activation against its float value on " + std::to_string(report::get<int64_t>(p, "images", 0)) +
       " images: light bars fake quantization, dark bars the deployed int8 kernels.</p>";
  s += report::sqnr_bars(report::get<nlohmann::json>(p, "layers", json::array()));
  s += error_split_table(report::get<nlohmann::json>(p, "layers", json::array()));
  if (r.contains("sensitivity")) {
    s += "<h2>Sensitivity ranking (most sensitive first)</h2><p>Output SQNR against fp32 with all layers quantized: " +
         num(report::get<double>(r["sensitivity"], "all_quantized_db", 0.0), 4) +
         " dB.</p><table><tr><th>layer</th><th>only this layer quantized</th><th>all but this layer</th></tr>";
    for (const auto& l : report::get<nlohmann::json>(r["sensitivity"], "layers", json::array()))
      s += "<tr><td>" + esc(report::get<std::string>(l, "layer", std::string(""))) + "</td><td>" +
           num(report::get<double>(l, "only_this_db", 0.0), 4) + " dB</td><td>" +
           num(report::get<double>(l, "all_but_this_db", 0.0), 4) + " dB</td></tr>";
    s += "</table>";
  }
  if (r.contains("auto_fallback")) s += "<h2>Automatic fallback</h2>" + kv_table(r["auto_fallback"]);
  return s + "</section>";
}

std::string activations_section(const json& r) {
  const json obs = report::get<nlohmann::json>(r, "observers", json::array());
  std::string s = "<section id=\"activations\"><h2>Activations: observed values and the chosen clipping range</h2>";
  if (obs.empty()) return s + "<p class=\"note\">No activation statistics in this report.</p></section>";
  s += "<p>Histograms (square-root heights), grey dashed lines the observed min and max, red lines the clipping range. "
       "Filter: <input id=\"hist-filter\" placeholder=\"node name\"></p><div class=\"grid\">";
  for (const auto& o : obs) {
    const std::string n = report::get<std::string>(o, "node", std::string("?"));
    json clip = report::get<json>(o, "clip", json::array({0, 0}));
    if (!clip.is_array() || clip.size() != 2 || !clip[0].is_number() || !clip[1].is_number()) clip = json::array({0, 0});
    s += "<div class=\"hcard\" data-name=\"" + esc(n) + "\"><div class=\"t\">" + esc(n) + "</div>" + report::histogram_svg(o) +
         "<div>" + esc(report::get<std::string>(o, "algorithm", std::string(""))) + " (" +
         esc(report::get<std::string>(o, "observer", std::string(""))) + "): clip " + num(clip[0].get<double>()) + " .. " +
         num(clip[1].get<double>()) + ", observed " + num(report::get<double>(o, "min", 0.0)) + " .. " +
         num(report::get<double>(o, "max", 0.0)) + "</div></div>";
  }
  return s + "</div></section>";
}

std::string weights_section(const json& r) {
  const json ws = report::get<nlohmann::json>(r, "weights", json::array());
  if (ws.empty()) return "";
  std::string s = "<section id=\"weights\"><h2>Weights: per-channel ranges</h2><div class=\"grid\">";
  for (const auto& w : ws)
    s += "<div class=\"hcard\" data-name=\"" + esc(report::get<std::string>(w, "node", std::string(""))) +
         "\"><div class=\"t\">" + esc(report::get<std::string>(w, "node", std::string(""))) + " (" +
         std::to_string(report::get<int64_t>(w, "channels", 0)) + " channels)</div>" + report::weight_ranges_svg(w) + "</div>";
  return s + "</div></section>";
}

std::string training_section(const json& r) {
  if (!r.contains("training") || !r["training"].contains("curve")) return "";
  const json& c = r["training"]["curve"];
  report::Series loss{"loss (moving average)", {}}, acc{"training accuracy % (moving average)", {}}, fq{"fake-quant top-1 %", {}};
  for (const auto& p : c) {
    const double step = report::get<double>(p, "step", 0.0);
    if (const double v = number(p, "loss"); !std::isnan(v)) loss.points.push_back({step, v});
    if (const double v = number(p, "train_accuracy"); !std::isnan(v)) acc.points.push_back({step, 100.0 * v});
    if (const double v = number(p, "top1_fakequant"); !std::isnan(v)) fq.points.push_back({step, 100.0 * v});
  }
  std::vector<report::Series> accs = {acc, fq};
  const json e = report::get<nlohmann::json>(r, "evaluation", json::object());
  const double last = c.empty() ? 0.0 : report::get<double>(c.back(), "step", 0.0);
  if (const double v = number(e, "top1_fp32"); !std::isnan(v)) accs.push_back({"float top-1 %", {{0.0, 100.0 * v}, {last, 100.0 * v}}});
  if (const double v = number(e, "top1_int8"); !std::isnan(v)) accs.push_back({"int8 top-1 % (deployed)", {{last, 100.0 * v}}});
  accs.erase(std::remove_if(accs.begin(), accs.end(), [](const report::Series& x) { return x.points.empty(); }), accs.end());
  std::string s = "<section id=\"training\"><h2>Training</h2>";
  if (!loss.points.empty()) s += report::line_chart({loss}, "step", "loss");
  if (!accs.empty()) s += report::line_chart(accs, "step", "accuracy %");
  return s + "</section>";
}

std::string profile_section(const json& r) {
  if (!r.contains("profile_int8")) return "";
  const json& p = r["profile_int8"];
  const json nodes = report::get<nlohmann::json>(p, "nodes", json::array());
  double total = 0;
  for (const auto& t : nodes) total += report::get<double>(t, "ms_per_image", 0.0);
  std::string s = "<section id=\"profile\"><h2>Where the int8 time goes</h2><p>Kernel time per image on the runtime over the " +
                  std::to_string(report::get<int64_t>(p, "images", 0)) + " evaluated images: " + num(total, 4) +
                  " ms in all; the slowest nodes first.</p><table><tr><th>node</th><th>op</th><th>kernel</th><th>ms per "
                  "image</th><th>share</th></tr>";
  size_t shown = 0;
  for (const auto& t : nodes) {
    if (++shown > 40) break;
    const double ms = report::get<double>(t, "ms_per_image", 0.0);
    s += "<tr><td>" + esc(report::get<std::string>(t, "node", std::string(""))) + "</td><td>" +
         esc(report::get<std::string>(t, "op", std::string(""))) + "</td><td>" +
         esc(report::get<std::string>(t, "impl", std::string(""))) + "</td><td>" + num(ms, 4) +
         "</td><td><svg width=\"200\" height=\"10\"><rect class=\"bar int8\" width=\"" +
         num(total > 0 ? 200.0 * ms / total : 0.0, 4) + "\" height=\"10\"/></svg> " +
         num(total > 0 ? 100.0 * ms / total : 0.0, 3) + " %</td></tr>";
  }
  return s + "</table></section>";
}

std::string run_section(const json& r, const std::string& source) {
  std::string s = "<section id=\"run\"><h2>The run</h2><table>";
  s += row("model", report::get<std::string>(r, "model", std::string("?")));
  s += row("config", report::get<std::string>(r, "config", std::string("?")));
  if (r.contains("seconds")) s += row("whole run", num(number(r, "seconds"), 4) + " s");
  if (r.contains("calibration")) {
    const json& c = r["calibration"];
    s += row("calibration", std::to_string(report::get<int64_t>(c, "images", 0)) + " images in " +
                                num(report::get<double>(c, "seconds", 0.0), 4) + " s (" +
                                num(report::get<double>(c, "images_per_s", 0.0), 4) + " images/s, " +
                                std::to_string(report::get<int64_t>(c, "threads", 0)) + " threads, " +
                                report::get<std::string>(c, "engine", std::string("?")) + ")");
  }
  const json view = evaluation_view_from_report(r);
  for (const auto& line : evaluation_page_rows())
    if (view.contains(line.when))
      if (const std::string v = render_page_text(line, view); !v.empty()) s += row(line.label, v);
  if (r.contains("target_arithmetic")) {
    const json& t = r["target_arithmetic"];
    s += row("target arithmetic",
             runtime::Arithmetic::from_json(report::get<json>(t, "arithmetic", json::object()).dump(), source + ": target_arithmetic")
                 .describe());
    if (t.contains("top1_float_requantization"))
      s += row("top-1 with ONNX's float requantization instead", pct(t, "top1_float_requantization"));
    for (const auto& l : report::get<json>(t, "layers_vs_float_requantization", json::array()))
      s += row("codes that differ from float requantization: " + report::get<std::string>(l, "node", "?"),
               std::to_string(report::get<int64_t>(l, "differing", 0)) + " of " +
                   std::to_string(report::get<int64_t>(l, "codes", 0)) + ", at most " +
                   std::to_string(report::get<int64_t>(l, "max_abs_diff", 0)) + " apart");
  } else {
    s += row("target arithmetic", "ONNX (float requantization)");
  }
  std::map<std::string, int> impls;
  for (const auto& k : report::get<nlohmann::json>(r, "kernels", json::array()))
    if (!report::get<bool>(k, "folded", false))
      impls[report::get<std::string>(k, "op", "?") + " on " + report::get<std::string>(k, "impl", "?")]++;
  std::string ks;
  for (const auto& [k, n] : impls) ks += (ks.empty() ? "" : ", ") + k + " x" + std::to_string(n);
  s += row("kernels", ks);
  for (const char* key : {"float_fallbacks", "runtime_float_groups", "export_float_ops"})
    for (const auto& f : report::get<json>(r, key, json::array())) s += row(std::string(key), scalar(f));
  if (r.contains("versions")) s += row("versions", r["versions"].dump());
  return s + "</table></section>";
}

std::string render(const json& r, const std::string& source) {
  std::string data = panel_data(r).dump();
  for (size_t p = 0; (p = data.find("</", p)) != std::string::npos; p += 3) data.replace(p, 2, "<\\/");
  const std::string title =
      "qfx report: " + std::filesystem::path(report::get<std::string>(r, "model", source)).filename().string();
  return "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + esc(title) + "</title><style>" + kStyle +
         "</style></head><body data-ready=\"0\"><header><h1>" + esc(title) + "</h1><div class=\"src\">" + esc(source) +
         "</div></header><main>" + summary(r) + graph_section(r) + sqnr_section(r) + activations_section(r) + weights_section(r) +
         training_section(r) + profile_section(r) + run_section(r, source) + "</main><script type=\"application/json\" id=\"qfx-data\">" +
         data + "</script><script>" + kScript + "</script></body></html>\n";
}

}  // namespace

std::string render_report_html(const std::string& text, const std::string& source) {
  const json r = report::parse_report(text, source);
  try {
    return render(r, source);
  } catch (const json::exception& e) {
    throw DataError(source + ": a report.json entry has an unexpected type (" + std::string(e.what()) + ")");
  }
}

std::string write_report_html(const std::string& output_dir) {
  std::string in;
  const std::string text = report::read_report_text(output_dir, &in);
  const std::string out = (std::filesystem::path(output_dir) / "report.html").string();
  write_file_atomic(out, render_report_html(text, in));
  return out;
}

}  // namespace qfx::quant
