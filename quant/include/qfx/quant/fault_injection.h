// Fault injection: named points where a test makes a pipeline fail as the world
// would (a full disk at commit, a rank killed mid-calibration). The qfx binaries
// install no hook, so these points do nothing there; test drivers install one.
#pragma once

#include <functional>

namespace qfx::quant::testing {

/// Where a fault can be injected.
enum class FaultPoint {
  kBeforeCommit,     ///< Staging::commit, after every output file was staged
  kCalibrationStep,  ///< each step of distributed calibration, before the batch is read
};

/// Called at each fault point with the point, the process's rank (0 in one
/// process) and the step (kCalibrationStep; 0 otherwise). A hook injects a fault
/// by throwing (a qfx::Error, as the real failure would) or by killing the process.
using FaultHook = std::function<void(FaultPoint point, int rank, long long step)>;

/// Installs `hook` for the whole process (an empty function removes it). Not
/// thread-safe against concurrent fault points: install it before the pipeline runs.
void set_fault_hook(FaultHook hook);

/// Runs the installed hook, if any.
void fault_point(FaultPoint point, int rank = 0, long long step = 0);

}  // namespace qfx::quant::testing
