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

/// Runs one batch on the runtime, calling `cb` for each watched value.
using RunBatch = std::function<void(const std::vector<at::Tensor>&, const std::function<void(const std::string&, const runtime::Tensor&)>&)>;

/// The lockstep loop: each step, every rank runs its next batch, keeping copies
/// of the observed values and each observation's min/max; the ranks all-gather
/// those ranges; then every rank, in rank order, feeds its own values
/// (FakeQuantize forward) or replays another rank's ranges
/// (ObserverBase::replay_range). Ends when no rank has a batch, then merges the
/// statistics (all_reduce_observers). `res` gets the images and batches of all ranks.
void calibrate_lockstep(fx::GraphModule& gm, const NextBatch& next, distributed::Context& ctx,
                        const std::map<std::string, std::vector<FakeQuantize*>>& observers, const RunBatch& run_batch,
                        const std::function<void(int64_t)>& progress, CalibrationResult* res);

}  // namespace qfx::quant::detail
