// Internal: the held-out samples of ptq.auto_fallback, and its report entry.
#pragma once

#include <nlohmann/json.hpp>

#include "qfx/quant/job_config.h"
#include "qfx/quant/ptq_algorithms.h"

namespace qfx::quant::pipeline {

/// ptq.auto_fallback's held-out samples in batches of `batch_size`: its own
/// `data` (the first num_samples), or the calibration data's samples after the
/// `calibration_size` calibrated ones (the calibration draw, continued: the
/// seeded selection is a prefix-stable partial shuffle). Throws ConfigError
/// naming the config when the calibration data has no samples left over.
HeldOutData held_out_data(const JobConfig& cfg, int64_t calibration_size, int64_t batch_size);

/// report.json's "auto_fallback" entry.
nlohmann::json auto_fallback_json(const AutoFallbackResult& r);

}  // namespace qfx::quant::pipeline
