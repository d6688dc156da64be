// A job config given as YAML text rather than a file: what `qfx.ptq(dict)` passes
// from Python.
#pragma once

#include <string>
#include <vector>

#include "qfx/quant/job_config.h"

namespace qfx::quant {

/// Loads a `qfx ptq` / `qfx qat` config from `yaml` text, exactly as
/// load_job_config loads a file, with `name` standing in for the file's path:
/// errors say `name:line:column`, and relative paths in the text are relative to
/// `name`'s folder (pass "<cwd>/<config dict>" to make them relative to the
/// current directory). `overrides` as in load_job_config. Throws ConfigError for
/// a YAML syntax error, an unknown key, a wrong type or value, or a bad override.
JobConfig load_job_config_text(const std::string& yaml, const std::string& name,
                               const std::vector<std::string>& overrides = {});

}  // namespace qfx::quant
