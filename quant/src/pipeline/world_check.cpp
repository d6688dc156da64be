// Whether `world` processes all get work from a job's data (see world_check.h).
#include "world_check.h"

#include <algorithm>
#include <string>

#include "qfx/error.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/pipeline.h"

namespace qfx::quant {
namespace pipeline {

void check_calibration_world(const JobConfig& cfg, int64_t samples, int world) {
  const int64_t bs = std::max<int64_t>(cfg.calibration.batch_size, 1);
  const int64_t nb = (samples + bs - 1) / bs;
  if (world > 1 && nb < world)
    throw ConfigError(cfg.path + ": " + std::to_string(nb) + " calibration batches for " + std::to_string(world) +
                      " processes: every process needs one (raise calibration.num_samples or lower calibration.batch_size)");
}

void check_training_world(const JobConfig& cfg, int64_t samples, int world) {
  const TrainingConfig& tc = cfg.training;
  const int64_t bs = std::max<int64_t>(tc.batch_size, 1), gbs = bs * world;
  const int64_t steps_per_epoch = (samples + gbs - 1) / gbs;
  int64_t total = tc.epochs * steps_per_epoch;
  if (tc.max_steps > 0) total = std::min(total, tc.max_steps);
  // Every rank must have samples in every step it takes (the observer synchronisation
  // runs inside the forward).
  if (const int64_t last = samples % gbs; world > 1 && total >= steps_per_epoch && last != 0 && last <= (world - 1) * bs)
    throw ConfigError(cfg.path + ": the last global batch of each epoch (" + std::to_string(last) + " samples) leaves rank " +
                      std::to_string(world - 1) + " without samples; make training.num_samples a multiple of batch_size x processes (" +
                      std::to_string(gbs) + ")");
}

}  // namespace pipeline

void check_world_size(const JobConfig& cfg, int world, bool training) {
  if (world <= 1) return;
  if (training) {
    const auto train = open_inputs(cfg.training.data, cfg.model.inputs, cfg.training.num_samples, -1);
    pipeline::check_training_world(cfg, train->size(), world);
    return;
  }
  const auto cal = open_inputs(cfg.calibration.data, cfg.model.inputs, cfg.calibration.num_samples, cfg.calibration.seed);
  pipeline::check_calibration_world(cfg, cal->size(), world);
}

}  // namespace qfx::quant
