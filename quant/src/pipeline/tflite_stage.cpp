// The TFLite output: the staged int8 ONNX written again in TFLite's scheme.
#include <map>

#include "qfx/runtime/tflite.h"
#include "stages.h"

namespace qfx::quant::pipeline {

void write_tflite_output(const Job& job, const std::string& onnx_path, const Staging& out) {
  if (!job.cfg.output.tflite) return;
  runtime::TfliteOptions options;
  options.int8_io = job.cfg.output.tflite_int8_io;
  options.what = "model_int8.onnx";
  const runtime::TfliteSummary sum = runtime::write_tflite(onnx_path, out.path("model_int8.tflite"), options);
  std::map<std::string, int> count;
  for (const auto& op : sum.ops) ++count[op];
  std::string ops;
  for (const auto& [op, k] : count) ops += (ops.empty() ? "" : ", ") + op + " x" + std::to_string(k);
  info(job.hooks, "model_int8.tflite: " + std::to_string(sum.ops.size()) + " TFLite ops (" + ops + "), inputs " +
                      (options.int8_io ? "int8" : "float32") + " NHWC");
  const runtime::Arithmetic& a = job.backend.arithmetic;
  if (a.requantize != runtime::RequantMode::kFixedPoint || a.elementwise != runtime::RequantMode::kFixedPoint)
    info(job.hooks, "note: backend " + job.backend.name + " converts for its own arithmetic (" + a.describe() +
                        "); LiteRT computes TFLite's fixed-point arithmetic, which backend tflite_like simulates bit for bit");
}

}  // namespace qfx::quant::pipeline
