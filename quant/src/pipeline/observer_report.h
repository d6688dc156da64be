// Internal: the observers' statistics as report.json's "observers" and "weights"
// sections (what report.html draws: histograms against the chosen clipping range,
// per-channel weight ranges).
#pragma once

#include <nlohmann/json.hpp>

#include "qfx/fx/graph_module.h"

namespace qfx::quant::detail {

/// One entry per activation FakeQuantize of `prepared` (after calibration), keyed by
/// the fx node it observes: {"node", "observer", "algorithm", "min", "max", "clip":
/// [lo, hi], "qscheme" ("affine" / "symmetric"), "quant_min", "quant_max"} and, for histogram observers, "hist": {"lo", "width", "counts"} with the
/// 2048 bins summed into at most `max_bins` (a whole number of bins each). Numbers
/// carry 5 significant digits.
nlohmann::json observer_statistics(const fx::GraphModule& prepared, int max_bins = 128);

/// Per-output-channel [min, max] of the deployed weight (batch norm folded) of each
/// quantized fused conv / linear module: {"node", "channels", "min": [...], "max": [...]}.
nlohmann::json weight_ranges(const fx::GraphModule& prepared);

}  // namespace qfx::quant::detail
