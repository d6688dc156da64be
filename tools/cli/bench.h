// qfx bench (see bench.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qfx::cli {

/// Arguments of `qfx bench`.
struct BenchArgs {
  /// The model as qfx ptq takes it (the libtorch baseline): TorchScript (frozen +
  /// optimize_for_inference), a torch.export .pt2 or a float ONNX model (the fx graph
  /// qfx ptq reads, run in libtorch); or a folder `qfx ptq` / `qfx qat` wrote: its
  /// report.json names the model, and model_fp32.onnx / model_int8.onnx in it fill
  /// `onnx` / `int8_onnx` when unset.
  std::string torchscript;
  /// The same model as ONNX (run on the qfx runtime, onednn backend); empty: a float
  /// ONNX model itself, else its fp32 graph exported in-process as `qfx ptq` builds it.
  std::string onnx;
  std::vector<int64_t> batches{1, 32};
  int64_t size = 0;                 ///< input height = width; 0: the ONNX model's static H and W (224 where dynamic)
  int iters = 10;
  int threads = 0;                  ///< both sides' threads; 0: as the other commands (set_default_threads)
  std::string int8_onnx;            ///< the int8 QDQ model (from qfx ptq): adds qfx int8 columns
  std::string pytorch_script;       ///< tools/bench/pytorch_calibration.py: adds PyTorch FX int8 (onednn engine) columns
  std::string arch = "resnet18";    ///< torchvision architecture of the model, for the PyTorch script
  /// PyTorch int8 flows timed by the script, one column pair each: "fx" (torch.ao
  /// prepare_fx / convert_fx), "pt2e" (torchao's prepare_pt2e / convert_pt2e, compiled).
  std::vector<std::string> pytorch_flows{"fx"};
  bool peak = false;                ///< measure the machine's peak (runtime::measure_peak) and report fractions of it
  /// The float values qfx ptq's calibration observed (the activations of the
  /// folder's encodings.json): the taps column taps these, as calibration does;
  /// empty: every float value.
  std::vector<std::string> observed;
};

/// Prints median latencies (ms) and ratios, measured side by side in one run:
/// libtorch fp32, qfx fp32, qfx fp32 with calibration's histogram taps (on the
/// values calibration observed when MODEL is a qfx ptq folder, else on every float
/// value); qfx's
/// achieved GFLOP/s (GOP/s for int8) from the model's multiply-accumulates, and
/// with `peak` the fraction of this machine's measured peak. libtorch's warnings
/// are counted, not shown; a PyTorch column that could not be measured says why
/// below the table; timings whose interquartile range exceeds a quarter of their
/// median (a busy machine) bring a warning on stderr. Throws ConfigError without
/// a model unless `peak` is set (then it prints the peak alone), IoError for a
/// folder without report.json or whose model is gone.
int run_bench(const BenchArgs& args);

}  // namespace qfx::cli
