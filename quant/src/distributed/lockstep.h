// Internal: data-parallel calibration in lockstep (see CalibrateOptions::distributed).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "qfx/quant/calibrate.h"
#include "qfx/quant/distributed.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/runtime/model.h"

namespace qfx::quant::detail {

/// Runs one batch on the runtime (its taps observe the values).
using RunBatch = std::function<void(const std::vector<at::Tensor>&)>;
/// Sets a tap on every observed value that calls `cb` with the value's name and
/// its float32 value in the logical layout (Model::set_taps).
using TapAll = std::function<void(const std::function<void(const std::string&, const stats::FloatView&)>& cb)>;

/// The lockstep loop (observing through taps set with `tap_all`): each step, every
/// rank runs its next batch and defers each
/// observation (ObserverBase::defer; a copy of the value where an observer
/// cannot), then starts an all-gather of every observation's min/max. While it
/// completes, the next step runs; then every rank applies the gathered step in
/// rank order: it commits its own observations (or feeds the copies) and replays
/// the other ranks' ranges (ObserverBase::replay_range), so every observer ends as
/// in one process reading the batches in order. Ends when no rank has a batch,
/// then merges the statistics (all_reduce_observers). `res` gets the images and
/// batches of all ranks.
void calibrate_lockstep(fx::GraphModule& gm, const NextBatch& next, distributed::Context& ctx,
                        const std::map<std::string, std::vector<FakeQuantize*>>& observers, const TapAll& tap_all,
                        const RunBatch& run_batch, const std::function<void(int64_t)>& progress, CalibrationResult* res);

}  // namespace qfx::quant::detail
