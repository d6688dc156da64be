// Side-by-side latency of ONNX models on several runtime backends (no libtorch):
// `qfx bench` of the runtime-only build and tools/bench/runtime_bench.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qfx::cli {

/// What to time: every model on every backend at every batch size.
struct RuntimeBenchArgs {
  std::vector<std::string> models;                   ///< ONNX files (float or int8 QDQ) with float32 inputs
  std::vector<std::string> backends{"onednn", "cuda"};  ///< runtime backends; the first is the ratios' baseline
  std::vector<int64_t> batches{1, 32};               ///< dynamic batch dimensions fed (other dynamic ones: 1)
  int iters = 20;                                    ///< timed runs per row, after 3 warm-up runs
  bool peak = false;                                 ///< measure this machine's oneDNN matmul peak first (runtime::measure_peak)
};

/// Prints one markdown table (model, batch, backend, median and interquartile range
/// in ms, images/s, speed relative to the first backend, and GOP/s: 2 operations per
/// multiply-accumulate of the model's convolutions and matrix products; with `peak`,
/// also that rate as a fraction of the measured int8 peak for a model with int8 ops,
/// else of the fp32 peak, after a line with the peak), measured side by side in
/// one process on random normal inputs, and a warning line where the timings spread
/// too far to trust the ratios. Returns 0. Throws ArgumentError for empty lists,
/// DataError for a non-float32 input, and the runtime's errors for a model a
/// backend cannot load.
int run_runtime_bench(const RuntimeBenchArgs& args);

}  // namespace qfx::cli
