// Internal: how a target's integer arithmetic changes the int8 model, layer by layer,
// against the same model run with ONNX's float requantization.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "qfx/quant/convert.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/pipeline.h"
#include "qfx/runtime/model.h"

namespace qfx::quant::detail {

/// Runs the int8 model `target` (loaded from `parsed` on runtime backend
/// `backend`, with its own arithmetic) and the same model loaded again with ONNX's
/// arithmetic (ModelOptions::arithmetic = {}) on the first `n`
/// samples of `data` (batches of `batch`), and compares the int8 codes of every
/// per-tensor encoding both models compute. Fills `E.arithmetic_layers` (most
/// differing first) and, when `top1` (the evaluation metric is top-1, so `data`
/// has labels), `E.top1_float_requant` (all of `data`, output `output`), and `E.arithmetic`. Differences compound downstream: a
/// layer's codes differ by its own rounding and by its inputs'.
void compare_arithmetic(const runtime::Model& target, const runtime::ParsedModel& parsed, const std::string& backend,
                                  const ExportResult& conv, Dataset& data, int64_t n, int64_t batch, const std::string& output,
                                  bool top1, PtqEvaluation& E);

}  // namespace qfx::quant::detail
