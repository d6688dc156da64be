// report.html's graph: DOT from report.json, laid out by Graphviz's dot.
#include "graph.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "html.h"
#include "report_check.h"

extern char** environ;

namespace qfx::quant::report {

namespace {

std::string dot_str(const std::string& s) {  // a DOT double-quoted string
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o + "\"";
}

bool integer_dtype(const std::string& d) { return d == "uint8" || d == "int8" || d == "int16" || d == "int32"; }

}  // namespace

std::string node_colour(const std::string& op, const std::string& impl, const std::string& dtype) {
  if (op.find("Lut") != std::string::npos || op.find("LUT") != std::string::npos || impl.find("lut") != std::string::npos)
    return "#edc948";                           // a lookup table
  if (!integer_dtype(dtype)) return "#d9d9d9";  // float
  if (impl == "onednn") return "#76b7e5";
  if (impl == "simd") return "#8cd17d";
  if (impl == "reference") return "#ffbe7d";
  return "#d4a6c8";  // a plug-in's kernel
}

std::map<std::string, nlohmann::json> sqnr_by_node(const nlohmann::json& r) {
  std::map<std::string, nlohmann::json> by_node, by_value, out;
  const nlohmann::json p = get<nlohmann::json>(r, "per_layer_sqnr", nlohmann::json::object());
  for (const auto& l : get<nlohmann::json>(p, "layers", nlohmann::json::array())) {
    by_node.emplace(get<std::string>(l, "node", std::string("")), l);
    if (const std::string v = get<std::string>(l, "value", std::string("")); !v.empty()) by_value.emplace(v, l);
  }
  for (const auto& k : get<nlohmann::json>(r, "kernels", nlohmann::json::array())) {
    const std::string node = get<std::string>(k, "node", std::string(""));
    if (auto it = by_node.find(node); it != by_node.end()) {
      out.emplace(node, it->second);
      continue;
    }
    for (const auto& o : get<nlohmann::json>(k, "outputs", nlohmann::json::array()))
      if (auto it = by_value.find(o.is_string() ? o.get<std::string>() : ""); it != by_value.end()) {
        out.emplace(node, it->second);
        break;
      }
  }
  return out;
}

std::string graph_dot(const nlohmann::json& r) {
  std::map<std::string, std::pair<double, double>> sqnr;  // node -> (fake-quant, int8 or NaN)
  for (const auto& [node, l] : sqnr_by_node(r))
    sqnr[node] = {get<double>(l, "sqnr_db_fakequant", 0.0), get<double>(l, "sqnr_db_int8", std::nan(""))};
  std::ostringstream d;
  d << "digraph qfx {\n  rankdir=TB; nodesep=0.25; ranksep=0.3;\n"
       "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, height=0.3];\n"
       "  edge [color=\"#777777\", arrowsize=0.6];\n";
  std::map<std::string, std::string> producer;  // value -> DOT id
  std::set<std::string> read;
  const nlohmann::json kernels = get<nlohmann::json>(r, "kernels", nlohmann::json::array());
  int i = 0;
  for (const auto& k : kernels) {
    const std::string id = "n" + std::to_string(i++);
    for (const auto& o : get<nlohmann::json>(k, "outputs", nlohmann::json::array())) producer[o.get<std::string>()] = id;
  }
  i = 0;
  std::set<std::string> inputs;
  for (const auto& k : kernels) {
    const std::string id = "n" + std::to_string(i++);
    const std::string node = get<std::string>(k, "node", std::string("?")), op = get<std::string>(k, "op", std::string("?")),
                      impl = get<std::string>(k, "impl", std::string("?")), dtype = get<std::string>(k, "dtype", std::string(""));
    std::string tip = node + "\n" + op + " on " + impl + " (" + (dtype.empty() ? "?" : dtype) + ")";
    std::string label = shorten(op, 24) + "\n" + shorten(node, 28);  // the whole name is in the tooltip
    if (auto it = sqnr.find(node); it != sqnr.end()) {
      tip += "\nSQNR fake-quant " + num(it->second.first) + " dB";
      if (!std::isnan(it->second.second)) tip += ", int8 " + num(it->second.second) + " dB";
      label += "\n" + num(std::isnan(it->second.second) ? it->second.first : it->second.second, 3) + " dB";
    }
    for (const auto& dcl : get<nlohmann::json>(k, "declined", nlohmann::json::array()))
      tip += "\ndeclined by " + get<std::string>(dcl, "impl", std::string("?")) + ": " +
             get<std::string>(dcl, "reason", std::string(""));
    d << "  " << id << " [id=" << dot_str("gnode-" + node) << ", label=" << dot_str(label) << ", tooltip=" << dot_str(tip)
      << ", fillcolor=" << dot_str(node_colour(op, impl, dtype)) << "];\n";
    for (const auto& in : get<nlohmann::json>(k, "inputs", nlohmann::json::array())) {
      const std::string v = in.get<std::string>();
      read.insert(v);
      auto p = producer.find(v);
      if (p == producer.end()) {
        if (inputs.insert(v).second)
          d << "  " << dot_str("in:" + v) << " [label=" << dot_str(v) << ", shape=ellipse, fillcolor=\"#ffffff\"];\n";
        d << "  " << dot_str("in:" + v) << " -> " << id << ";\n";
      } else {
        d << "  " << p->second << " -> " << id << ";\n";
      }
    }
  }
  std::vector<std::string> outs;
  for (const auto& [v, id] : producer)
    if (!read.count(v)) {
      d << "  " << dot_str("out:" + v) << " [label=" << dot_str(v) << ", shape=ellipse, fillcolor=\"#ffffff\"];\n  " << id
        << " -> " << dot_str("out:" + v) << ";\n";
      outs.push_back(v);
    }
  if (r.contains("host_postprocess")) {
    std::string nodes;
    for (const auto& n : get<nlohmann::json>(r["host_postprocess"], "nodes", nlohmann::json::array()))
      nodes += n.get<std::string>() + "\n";
    d << "  subgraph cluster_host {\n    label=\"host post-processing (float, not deployed)\"; style=dashed; "
         "fontname=\"Helvetica\"; fontsize=10;\n"
      << "    host [label=" << dot_str(nodes) << ", fillcolor=\"#f1ce63\", id=\"gnode-host\"];\n  }\n";
    for (const auto& o : outs) d << "  " << dot_str("out:" + o) << " -> host [style=dashed];\n";
  }
  d << "}\n";
  return d.str();
}

// How long Graphviz may take (a densely connected graph, such as DenseNet's, can take
// many minutes on a slow machine; the report then shows the table).
constexpr int kLayoutSeconds = 60;

// Waits for `pid` at most kLayoutSeconds; false (and the process killed) past that.
static bool wait_bounded(pid_t pid, int* status) {
  for (int ms = 0; ms < kLayoutSeconds * 1000; ms += 20) {
    if (waitpid(pid, status, WNOHANG) == pid) return true;
    usleep(20000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, status, 0);
  return false;
}

std::string layout_svg(const std::string& dot_text, std::string* why) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string tmpl = (fs::temp_directory_path(ec) / "qfx-report-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) {
    *why = "no temporary folder for Graphviz";
    return "";
  }
  const fs::path dir(tmpl), in = dir / "graph.dot", out = dir / "graph.svg";
  std::ofstream(in) << dot_text;
  const std::string in_s = in.string(), out_s = out.string();
  std::vector<char*> argv = {const_cast<char*>("dot"),         const_cast<char*>("-Tsvg"),      const_cast<char*>("-o"),
                             const_cast<char*>(out_s.c_str()), const_cast<char*>(in_s.c_str()), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);  // dot's warnings stay out of qfx's output
  pid_t pid = 0;
  std::string svg;
  if (posix_spawnp(&pid, "dot", &fa, nullptr, argv.data(), environ) != 0) {
    *why = "Graphviz's dot is not installed (Debian: graphviz): the graph is shown as a table";
  } else if (int status = 0; !wait_bounded(pid, &status)) {
    *why = "Graphviz's dot took over " + std::to_string(kLayoutSeconds) + " s to lay out the graph: it is shown as a table";
  } else {
    std::ifstream f(out);
    std::stringstream ss;
    ss << f.rdbuf();
    svg = ss.str();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || svg.find("<svg") == std::string::npos) {
      *why = "Graphviz's dot failed to lay out the graph: it is shown as a table";
      svg.clear();
    } else {
      svg = svg.substr(svg.find("<svg"));  // no XML declaration or DOCTYPE inside HTML
    }
  }
  posix_spawn_file_actions_destroy(&fa);
  fs::remove_all(dir, ec);
  return svg;
}

}  // namespace qfx::quant::report
