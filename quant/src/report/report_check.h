// Internal: report.json's entries checked against the types qfx writes, before
// report.html draws them.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace qfx::quant::report {

/// Checks every entry of `r` that report.html draws against the type qfx writes
/// there (numbers may also be null: qfx writes NaN so). Entries the page does not
/// read, and absent ones, are not checked. Throws DataError naming `source` and the
/// entry as a path ("kernels[3].node is a number; qfx writes a string there").
void check_report_types(const nlohmann::json& r, const std::string& source);

/// report.json's text parsed and checked (a JSON object with `kernels`, every drawn
/// entry of the type qfx writes). Throws DataError naming `source`.
nlohmann::json parse_report(const std::string& text, const std::string& source);

/// The text of OUTPUT_DIR/report.json; `path` receives that file's path. Throws
/// IoError naming it when it is missing or unreadable.
std::string read_report_text(const std::string& output_dir, std::string* path);

/// `s` cut to at most `max` characters by an ellipsis in its middle (node labels;
/// the whole name stays in tooltips).
std::string shorten(const std::string& s, size_t max);

}  // namespace qfx::quant::report
