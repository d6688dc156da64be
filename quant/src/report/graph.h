// Internal: the deployed model's graph for report.html, laid out by Graphviz.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>

namespace qfx::quant::report {

/// The Graphviz DOT text of the graph in report.json's "kernels" (edges from their
/// "inputs" / "outputs"; folded nodes left out), top to bottom, each node coloured
/// by what it runs as and carrying its per-layer SQNR and declines as a tooltip;
/// host post-processing ("host_postprocess") as a cluster below the outputs.
std::string graph_dot(const nlohmann::json& report);

/// Each deployed node's per-layer SQNR entry (report.json per_layer_sqnr.layers),
/// by kernel node name: the layer of the same node, else the layer whose quantized
/// "value" the node outputs (a lookup table is named after the first op of the
/// region it replaces, its output after the last). Nodes without one are absent.
std::map<std::string, nlohmann::json> sqnr_by_node(const nlohmann::json& report);

/// The SVG that `dot -Tsvg` makes of `dot_text`; empty, with `why` set, when
/// Graphviz is not on the PATH, fails, or takes over 60 s (it is then killed).
std::string layout_svg(const std::string& dot_text, std::string* why);

/// The colour report.html gives a node that runs as `impl` producing `dtype`.
std::string node_colour(const std::string& op, const std::string& impl, const std::string& dtype);

}  // namespace qfx::quant::report
