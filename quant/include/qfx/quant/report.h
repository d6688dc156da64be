// report.html: the report.json of a qfx ptq / qfx qat run drawn as one self-contained
// page (no network, no external files), for a person to look at.
#pragma once

#include <string>
#include <vector>

namespace qfx::quant {

/// Renders report.html from the text of a report.json written by `ptq()` / `qat()`:
/// the deployed model's graph laid out top to bottom by Graphviz (`dot` on the
/// PATH; without it the page says so and shows the nodes as a table), each node
/// coloured by what it runs as (int8 on which kernel, float) with its per-layer
/// SQNR and the kernels that declined it on hover and in a side panel; per-layer SQNR
/// (fake-quant and int8) as bars, worst first; the sensitivity ranking and the
/// automatic-fallback decisions when they ran; each observed activation's histogram
/// with the clipping range and the algorithm that chose it; per-channel weight
/// ranges; timings, accuracy, versions and the target arithmetic; QAT's training
/// curves. `source` names the report in the page. Throws DataError when the text is
/// not a report.json (names `source`).
std::string render_report_html(const std::string& report_json, const std::string& source);

/// `qfx report DIR`: reads DIR/report.json and writes DIR/report.html atomically;
/// returns the path written. Throws IoError (missing or unreadable report.json, a
/// folder that cannot be written) or DataError (not a report.json).
std::string write_report_html(const std::string& output_dir);

/// `qfx report DIR1 DIR2 ...`: the report.json of several runs of one model (targets,
/// configs) side by side: a text table (returned) of each run's headline metrics
/// (top-1 fp32 / int8, output SQNR, int8 ops, latency) and of the layers whose SQNR
/// differs most between the runs, and `html_path` (written atomically when not
/// empty) with the same tables and each run's per-layer SQNR bars. Runs are named
/// by their folders. Throws IoError (a missing or unreadable report.json, a path
/// that cannot be written), DataError (not a report.json, naming the folder), or
/// ConfigError (fewer than two folders).
std::string compare_reports(const std::vector<std::string>& output_dirs, const std::string& html_path);

}  // namespace qfx::quant
