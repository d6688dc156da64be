// calibrate: run calibration data through a prepared model on the runtime
// (oneDNN or reference kernels) and feed its observers, instead of libtorch.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"

namespace qfx::quant {

/// Produces the next calibration batch: one tensor per graph input ([B, ...], the
/// model's layout; float32, or int64 / int32 for integer inputs), or an empty vector
/// when the data is exhausted.
using NextBatch = std::function<std::vector<at::Tensor>()>;

class Dataset;
namespace distributed {
class Context;
}
/// The samples of `data` in order, `batch_size` at a time, as a NextBatch: one
/// tensor per model input (Dataset::batch_inputs; int64 for integer data). `data`
/// must outlive the returned function. With `world` > 1,
/// rank `rank`'s shard: batches rank, rank + world, rank + 2 world, ... of that
/// sequence (data-parallel calibration).
NextBatch batches(Dataset& data, int64_t batch_size, int rank = 0, int world = 1);

/// Options of `calibrate`.
struct CalibrateOptions {
  /// Runtime backend that runs the float model: "onednn" or "reference".
  std::string backend = "onednn";
  /// Where the float passes run: "cpu" (the runtime `backend`, or libtorch where the
  /// graph cannot be lowered) or "cuda" (`calibration.device: cuda`): the prepared
  /// GraphModule on libtorch's CUDA kernels, every batch copied to the GPU, every
  /// observed tensor reduced where it lives (ObserverBase::observe_on_device) and, by
  /// histogram observers, counted there too (calibrate sets
  /// HistogramObserver::count_on_gpu where qfx's CUDA kernels can run; otherwise the
  /// tensor is copied to the host to be counted); the module returns to the host
  /// afterwards, also on an error. Throws ConfigError where libtorch cannot run on the
  /// device, and with `distributed` active (one process calibrates on the GPU).
  std::string device = "cpu";
  /// Shape of each graph input (-1: dynamic), as in ExportOptions.
  std::vector<std::vector<int64_t>> input_shapes;
  /// When the float graph cannot be lowered to the runtime (a wrapped call or an
  /// op without ONNX export), run the prepared GraphModule on libtorch instead of
  /// throwing. The reason is reported in CalibrationResult::fallback_reason.
  bool allow_libtorch_fallback = true;
  /// Called after each batch with the number of images seen so far (all ranks).
  std::function<void(int64_t)> progress;
  /// Data-parallel calibration: every rank passes its shard of the batches
  /// (`batches(data, bs, rank, world)`). The ranks run in lockstep; after each
  /// step every rank replays the other ranks' batch ranges into its observers
  /// in rank order (ObserverBase::replay_range), so histogram grids and moving
  /// averages evolve exactly as in one process reading the batches in order,
  /// and at the end the counts are summed (all_reduce_observers). The qparams
  /// then equal a single-process run's over the same batches, bit for bit.
  /// Needs the runtime path (not the libtorch fallback) and at least one batch
  /// per rank; per-channel moving-average activation observers are refused.
  distributed::Context* distributed = nullptr;
};

/// What `calibrate` did.
struct CalibrationResult {
  std::string engine;           ///< "runtime:onednn", "runtime:reference", "libtorch" or "libtorch:cuda"
  std::string fallback_reason;  ///< why libtorch was used (empty otherwise)
  int64_t images = 0;           ///< samples seen (sum of batch sizes)
  int64_t batches = 0;
  int observed_tensors = 0;     ///< activation values fed to observers per batch
  double seconds = 0;           ///< wall time of the data loop
  int threads = 0;              ///< threads it computed with (libtorch's and OpenMP's count)
};

/// Calibrates a `prepare_fx` (or `prepare_qat_fx`) model:
/// 1. weight observers see the deployed (batch-norm folded) weights once;
/// 2. the float graph is exported to ONNX in memory (`convert_fx` with
///    `float_model`), loaded on the runtime, and every value an activation
///    FakeQuantize observes is watched (`runtime::Model::run` with a callback);
/// 3. each batch runs once on the runtime; each watched value is handed, without
///    a copy, to the FakeQuantize modules that observe it (their observer_enabled
///    flags are honoured, so shared and fixed-qparams observers behave as in a
///    libtorch forward).
/// Memory stays flat as the data grows: nothing is kept beyond the batch in flight
/// (distributed: each rank holds copies of its batch's observed values for one step).
/// Throws DataError for NaN/Inf in a watched tensor (naming it), a batch whose
/// shape does not fit the model, or data that gives no samples at all, UnsupportedOpError when the graph cannot be
/// lowered and `allow_libtorch_fallback` is false; distributed: ConfigError for
/// the limits above, DistributedError when a rank fails.
CalibrationResult calibrate(fx::GraphModule& gm, const NextBatch& next, const CalibrateOptions& options = {});

class LoweredModel;
/// Steps 1 and 3 of `calibrate` on a float graph already lowered from `gm`
/// (LoweredModel of this prepared model: no export, no load). A pipeline lowers
/// once and shares the loaded model between calibration and evaluation.
/// `options.backend` names the engine in the result only (the lowered model's
/// backend runs); `input_shapes` and `allow_libtorch_fallback` are not used.
/// Same errors as `calibrate`, minus UnsupportedOpError.
CalibrationResult calibrate(fx::GraphModule& gm, LoweredModel& lowered, const NextBatch& next, const CalibrateOptions& options = {});

}  // namespace qfx::quant
