// Internal: the inline SVG charts of report.html (no script needed to draw them).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace qfx::quant::report {

/// Horizontal bars of per-layer SQNR in dB, in the order given (worst first): one
/// bar for fake quantization, one for the deployed int8 kernels where measured.
/// `layers`: report.json's per_layer_sqnr.layers.
std::string sqnr_bars(const nlohmann::json& layers);

/// An observed activation's histogram (report.json "observers" entry): the counts,
/// the observed min / max (grey) and the clipping range the algorithm chose (red).
std::string histogram_svg(const nlohmann::json& observer);

/// Per-channel weight ranges (report.json "weights" entry): one vertical segment
/// from min to max per output channel, around zero.
std::string weight_ranges_svg(const nlohmann::json& weights);

/// One named series of (x, y) points.
struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
};
/// Lines over a shared x axis (QAT: loss and accuracy against the step).
std::string line_chart(const std::vector<Series>& series, const std::string& x_label, const std::string& y_label);

}  // namespace qfx::quant::report
