// QAT checkpoints: stop a training run and resume it with the same numbers.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>

#include "qfx/fx/graph_module.h"

namespace qfx::quant {

/// Saves a QAT checkpoint to `path` (libtorch's serialize archive, written to a
/// temporary name and renamed): every parameter and buffer of `model` (weights, batch
/// norm running statistics, observer statistics, fake-quant scale / zero_point /
/// enable flags, learnt LSQ scales), the optimizer's state (momentum buffers, Adam
/// moments), `step`, and the prepared graph's hash. Schedule flags that are not
/// tensors (frozen batch norm) are not stored: re-apply the schedule for `step` after
/// loading, as a loop that calls `freeze_bn_stats` from a step count does anyway.
/// Throws IoError if `path` cannot be written.
void save_qat_checkpoint(const std::string& path, fx::GraphModule& model, torch::optim::Optimizer& optimizer,
                         int64_t step);

/// Loads a checkpoint saved by `save_qat_checkpoint` into a model prepared the same
/// way (same graph, same qconfig) and an optimizer over the same parameters; returns
/// the saved step. The model and the optimizer's state stay on the model's device
/// (a checkpoint saved on a GPU loads on the CPU and the other way round). Throws
/// IoError if unreadable, DataError (naming `path`) if the
/// checkpoint belongs to a different prepared graph.
int64_t load_qat_checkpoint(const std::string& path, fx::GraphModule& model, torch::optim::Optimizer& optimizer);

}  // namespace qfx::quant
