// The evaluation result of a job described once: its fields (report.json key,
// label, unit, formats) and how each renderer lays them out. report.json's
// "evaluation", the `qfx ptq` console lines and report.html's summary and run table
// all read this description.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "qfx/quant/pipeline.h"

namespace qfx::quant {

/// How a field's value reads.
enum class ResultUnit {
  kFraction,  ///< 0..1, shown as a percentage (console and page scale it by 100)
  kDb,        ///< decibels
  kMs,        ///< milliseconds
  kNumber,    ///< a plain number
  kCount,     ///< an integer count
  kText,      ///< a string
  kFlag,      ///< true or false
  kList,      ///< an array of objects (its items' fields are described as "KEY.FIELD")
};

/// One field of the evaluation result.
struct EvaluationField {
  /// Its path in report.json's "evaluation" object, dotted for nested objects
  /// ("reference_check.identical_outputs"); for an item of a kList field,
  /// "LIST.FIELD" ("outputs.cosine_int8_vs_fp32").
  std::string key;
  std::string label;    ///< for people ("top-1 int8")
  ResultUnit unit = ResultUnit::kNumber;
  std::string console;  ///< printf format of the console value, after a fraction's x100 ("%.2f")
  int digits = 4;       ///< significant digits on the page
  /// The value of a PTQ run (null: absent from that run); unset for derived fields
  /// and list items.
  std::function<nlohmann::json(const PtqEvaluation&)> get;
  /// Derived fields (never in report.json): the value from the other fields of a
  /// view (null: absent).
  std::function<nlohmann::json(const nlohmann::json& view)> derive;
  /// Whether the page shows it as a summary card.
  bool card = false;
};

/// A line of the console or a row of the page's run table, laid out from fields:
/// `{KEY}` in `text` is field KEY's value as that renderer formats it.
struct EvaluationLine {
  std::string when;   ///< the field that must be present for the line to show
  std::string label;  ///< the page: the row's header ("" on the console)
  std::string text;   ///< the console line, or the page row's value
  /// kList lines: one line per item of field `when`, shown when it has at least
  /// `min_items`; `{FIELD}` then names the item's fields.
  size_t min_items = 0;
};

/// The fields, in the order report.json, the console and the page's cards take them.
const std::vector<EvaluationField>& evaluation_fields();
/// The console's result lines before the per-layer tables (metrics, agreement,
/// latency) and after them (the reference check).
const std::vector<EvaluationLine>& evaluation_console_lines();
const std::vector<EvaluationLine>& evaluation_console_check_lines();
/// The page's run-table rows.
const std::vector<EvaluationLine>& evaluation_page_rows();

/// The view of a PTQ run's evaluation: every present field by key, derived ones
/// included, plus "runtime_backend" (the backend the reference check compares).
nlohmann::json evaluation_view(const PtqEvaluation& E, const std::string& runtime_backend);
/// The same view read back from a report.json (PTQ or QAT): its "evaluation"
/// object flattened, derived fields computed. Never throws on other shapes.
nlohmann::json evaluation_view_from_report(const nlohmann::json& report);
/// report.json's "evaluation" object: the view's fields other than derived ones,
/// nested by their dotted keys.
nlohmann::json evaluation_report_json(const nlohmann::json& view);

/// `lines` laid out for the console (printf formats), those whose field is present.
std::vector<std::string> render_console(const std::vector<EvaluationLine>& lines, const nlohmann::json& view);
/// A field's value as the page shows it ("91.23 %", "34.1 dB"); "-" when absent.
std::string page_value(const nlohmann::json& view, const std::string& key);
/// `line.text` laid out for the page (page_value for each field).
std::string render_page_text(const EvaluationLine& line, const nlohmann::json& view);

}  // namespace qfx::quant
