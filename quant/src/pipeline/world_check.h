// Whether a data-parallel run of `world` processes gives every process work: the
// same rules for the --nproc launcher (before any process starts) and for each rank.
#pragma once

#include <cstdint>

#include "qfx/quant/job_config.h"

namespace qfx::quant::pipeline {

/// PTQ: `samples` calibration samples in batches of calibration.batch_size must make
/// at least `world` batches. Throws ConfigError naming both counts and the keys to change.
void check_calibration_world(const JobConfig& cfg, int64_t samples, int world);

/// QAT: a step takes training.batch_size x `world` of the `samples` training samples;
/// the last global batch of an epoch must reach every rank (when the run takes a whole
/// epoch). Throws ConfigError naming the batch, the rank left out and the multiple.
void check_training_world(const JobConfig& cfg, int64_t samples, int world);

}  // namespace qfx::quant::pipeline
