// Calibrate stage: the calibration data through the lowered float model.
#include "qfx/quant/distributed.h"
#include "qfx/quant/fake_quantize.h"
#include "stages.h"

namespace qfx::quant::pipeline {

CalibrationResult calibrate_stage(const Job& job, fx::GraphModule& gm, LoweredModel& lowered, Dataset& cal,
                                  distributed::Context* dist) {
  CalibrateOptions o;
  o.backend = job.runtime();
  o.input_shapes = {job.cfg.model.input_shape};
  o.distributed = dist;
  o.device = job.cfg.calibration.device;
  const int64_t n = cal.size();
  o.progress = [&](int64_t done) { progress(job.hooks, "calibration", done, n); };
  const int64_t bs = job.cfg.calibration.batch_size;
  CalibrationResult r = calibrate(gm, lowered, batches(cal, bs, dist ? dist->rank() : 0, dist ? dist->world_size() : 1), o);
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  return r;
}

}  // namespace qfx::quant::pipeline
