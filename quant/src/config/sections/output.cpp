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
  }};
  return t;
}

void read_output(const SectionReader& s, JobConfig* c) {
  s.read("dir", &c->output.dir);
  s.read("float_model", &c->output.float_model);
  s.read("report_html", &c->output.report_html);
  s.read("block_weight_format", &c->output.block_weight_format);
}

}  // namespace qfx::quant::sections
