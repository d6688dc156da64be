// The qfx command line with fault injection, for the command-line tests only
// (the qfx binary carries no hook). From the environment:
//   QFX_FAULT_BEFORE_COMMIT=1  commit fails after every output file was staged,
//                              as a full disk would (IoError, exit code 7);
//   QFX_TEST_KILL_RANK=r       rank r dies (SIGKILL) at its second distributed
//                              calibration step, as an OOM-killed process would.
#include <csignal>
#include <cstdlib>
#include <string>

#include "qfx/error.h"
#include "qfx/quant/fault_injection.h"

namespace {

const bool installed = [] {
  using qfx::quant::testing::FaultPoint;
  const char* commit = std::getenv("QFX_FAULT_BEFORE_COMMIT");
  const char* kill = std::getenv("QFX_TEST_KILL_RANK");
  const bool fail_commit = commit && *commit;
  const int kill_rank = kill && *kill ? std::atoi(kill) : -1;
  qfx::quant::testing::set_fault_hook([=](FaultPoint p, int rank, long long step) {
    if (p == FaultPoint::kBeforeCommit && fail_commit)
      throw qfx::IoError("fault injected before commit (QFX_FAULT_BEFORE_COMMIT)");
    if (p == FaultPoint::kCalibrationStep && step == 1 && rank == kill_rank) ::raise(SIGKILL);
  });
  return true;
}();

}  // namespace
