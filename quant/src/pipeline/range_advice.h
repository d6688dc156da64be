// Internal: ranges that waste int8 codes, found in report.json's "observers" section,
// each with the config change that would fix it (report.json "range_advice", and one
// console line each).
#pragma once

#include <nlohmann/json.hpp>

namespace qfx::quant::detail {

/// Share of a tensor's values (from its histogram) outside the clipping range above
/// which clipping is flagged.
constexpr double kClippedShare = 0.01;
/// The central 99.9 % of a tensor's values spanning less than this fraction of the
/// clipping range is flagged (fewer than 256 / 32 = 8 of an 8-bit range's codes).
constexpr double kConcentratedSpan = 1.0 / 32;

/// Advice for the activation observers `observers` (observer_statistics' entries,
/// with "qscheme", "quant_min", "quant_max"): one {"node", "problem", "detail",
/// "fix"} per finding, "problem" one of
/// - "symmetric_nonnegative": a symmetric range over a tensor never below 0 (the
///   negative half of the codes unused); fix: an affine range;
/// - "clipped": more than kClippedShare of the values outside the clipping range
///   (histogram observers); fix: minmax or a higher percentile;
/// - "concentrated": the central 99.9 % of the values in under kConcentratedSpan of
///   the range (outliers stretch it; histogram observers); fix: mse or percentile.
nlohmann::json range_advice(const nlohmann::json& observers);

}  // namespace qfx::quant::detail
