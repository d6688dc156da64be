// The `output:` section: where the outputs go and which are written.
#include "sections.h"

namespace qfx::quant::sections {

const KeyTable& output_keys() {
  static const KeyTable t{"output", {
      {"dir", KeyType::kPath, {}, {}, "qfx_ptq_out", "the output folder (qfx_qat_out with a training section)"},
      {"float_model", KeyType::kBool, {}, {}, "true", "also write model_fp32.onnx"},
      {"report_html", KeyType::kBool, {}, {}, "true", "also write report.html"},
      {"block_weight_format", KeyType::kChoice, {"dequantize_linear", "matmul_nbits"}, {}, "dequantize_linear",
       "block-wise 4-bit MatMul weights as DequantizeLinear (ONNX) or com.microsoft MatMulNBits (ONNX Runtime)"},
      {"matmul_nbits_accuracy_level", KeyType::kInt, {}, {0, 4, false, false, "must be in [0, 4]"}, "1",
       "MatMulNBits' accuracy_level: 1 float32 activations (W4A16), 4 int8 activations per block (W4A8)"},
      {"formats", KeyType::kList, {"onnx", "tflite", "aimet"}, {}, "[onnx]",
       "the int8 model's formats: onnx (always written), tflite (model_int8.tflite, TFLite's int8 scheme) and aimet "
       "(model_aimet.onnx + model_aimet.encodings, Qualcomm AIMET's encodings)"},
      {"aimet_encoding_version", KeyType::kChoice, {"1.0.0", "2.0.0"}, {}, "1.0.0",
       "the AIMET encodings format of model_aimet.encodings"},
      {"tflite_io", KeyType::kChoice, {"float", "int8"}, {}, "float",
       "the .tflite's inputs and outputs: float (QUANTIZE / DEQUANTIZE at the edges) or int8 codes"},
  }};
  return t;
}

void read_output(const SectionReader& s, JobConfig* c) {
  s.read("dir", &c->output.dir);
  s.read("float_model", &c->output.float_model);
  s.read("report_html", &c->output.report_html);
  s.read("block_weight_format", &c->output.block_weight_format);
  s.read("matmul_nbits_accuracy_level", &c->output.matmul_nbits_accuracy_level);
  if (s["matmul_nbits_accuracy_level"] && c->output.block_weight_format != "matmul_nbits")
    yaml::bad(s.path(), s["matmul_nbits_accuracy_level"],
              "output.matmul_nbits_accuracy_level needs output.block_weight_format: matmul_nbits");
  std::string io = "float";
  s.read("tflite_io", &io);
  c->output.tflite_int8_io = io == "int8";
  s.read("aimet_encoding_version", &c->output.aimet_encoding_version);
  if (auto n = s["formats"]) {
    if (!n.IsSequence() || n.size() == 0)
      yaml::bad(s.path(), n, "output.formats must be a list of onnx, tflite and aimet: [onnx], [onnx, tflite], ...");
    c->output.tflite = c->output.aimet = false;
    for (const auto& e : n) {
      const std::string f = yaml::as_choice(s.path(), e, s.what("formats"), s.key("formats").choices);
      c->output.tflite |= f == "tflite";
      c->output.aimet |= f == "aimet";
    }
  }
}

}  // namespace qfx::quant::sections
