// Internal: one reader per section of a job config (job_config.cpp composes them),
// each driven by its section's key table (qfx/quant/config_keys.h).
#pragma once

#include <string>
#include <vector>

#include "../section_reader.h"
#include "qfx/quant/config_keys.h"
#include "qfx/quant/job_config.h"

namespace qfx::quant::sections {

/// The key tables of the sections (job_config_keys() lists them).
const KeyTable& model_keys();
const KeyTable& tracer_keys();
const KeyTable& qconfig_keys();
const KeyTable& calibration_keys();
const KeyTable& evaluation_keys();
const KeyTable& training_keys();
const KeyTable& ptq_keys();
const KeyTable& output_keys();

/// `model:` into c->model (path, inputs) and c->tracer (libraries, input shapes
/// and dtypes for tracing).
void read_model(const SectionReader& m, JobConfig* c);
/// `calibration:` into c->calibration (enabled); needs c->model's inputs.
void read_calibration(const SectionReader& s, JobConfig* c);
/// `evaluation:` into c->evaluation (enabled); needs c->model's inputs.
void read_evaluation(const SectionReader& s, JobConfig* c);
/// `training:` into c->training (enabled); needs c->model's inputs.
void read_training(const SectionReader& s, JobConfig* c);
/// `ptq:` into c->ptq; auto_fallback reads c->calibration's labels.
void read_ptq(const SectionReader& s, JobConfig* c);
/// `output:` into c->output (its default dir set by the caller).
void read_output(const SectionReader& s, JobConfig* c);

/// A data section of config `path` at `n` ("calibration.data"): one source, or one
/// per model input ({NAME: {format: ..., images: ...}, ...}, required for a model
/// with several inputs), in the model's input order. ConfigError at file:line:column.
DataSpec read_data(const std::string& path, const YAML::Node& n, const std::string& what, const std::vector<InputSpec>& inputs);

/// The keys every sample section (calibration, evaluation, training) has: `data`
/// (for c's model inputs), `num_samples` and `batch_size`; sets `*enabled`.
void read_samples(const SectionReader& s, const JobConfig& c, bool* enabled, DataSpec* data, int64_t* num_samples,
                  int64_t* batch_size);

/// The dotted keys whose values are file or folder paths, from the key tables
/// ("*" stands for each list item or each per-input source).
std::vector<std::string> path_keys();

}  // namespace qfx::quant::sections
