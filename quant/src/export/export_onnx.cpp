// export_onnx: a converted (or prepared, float_model) GraphModule -> ONNX (QDQ) + encodings.
#include "qfx/quant/convert.h"

#include <nlohmann/json.hpp>

#include "exporter.h"
#include "matmul_nbits.h"
#include "qfx/atomic_file.h"
#include "qfx/error.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/quantized_modules.h"

namespace qfx::quant {
using detail::Exporter;

namespace {
bool has_fake_quantize(const fx::GraphModule& gm) {
  for (const fx::Node* n : gm.graph().nodes())
    if (n->op() == fx::Opcode::kCallModule && dynamic_cast<FakeQuantize*>(gm.get_submodule(n->target()).get())) return true;
  return false;
}

// True if a converted model holds block-wise weights (QuantizedConvLinear or a
// functional linear's QuantDequant).
bool has_block_weights(const fx::GraphModule& gm) {
  for (const fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::kCallModule) continue;
    const auto m = gm.get_submodule(n->target());
    if (const auto* q = dynamic_cast<const QuantizedConvLinear*>(m.get()))
      if (q->weight_quantized() && q->weight_qparams().block_size > 0) return true;
    if (const auto* q = dynamic_cast<const QuantDequant*>(m.get()))
      if (q->qparams().block_size > 0) return true;
  }
  return false;
}

std::string export_graph(fx::GraphModule& gm, ExportOptions options, ExportResult& r) {
  if (!options.float_model && has_block_weights(gm)) options.opset = std::max(options.opset, 21);
  Exporter e(gm, options, r);
  e.run();
  if (!options.matmul_nbits || options.float_model) return e.bytes();
  if (options.matmul_nbits_accuracy_level < 0 || options.matmul_nbits_accuracy_level > 4)
    throw ArgumentError("export_onnx: matmul_nbits_accuracy_level must be 0..4, got " +
                        std::to_string(options.matmul_nbits_accuracy_level));
  onnx::ModelProto m;
  m.ParseFromString(e.bytes());
  r.matmul_nbits = detail::use_matmul_nbits(m, options.matmul_nbits_accuracy_level);
  std::string out;
  if (!m.SerializeToString(&out)) throw IoError("export_onnx: cannot serialize the ONNX model");
  return out;
}

std::string serialize(fx::GraphModule& gm, const ExportOptions& options, ExportResult& r) {
  if (options.opset < 13 || options.opset > 21)
    throw ConfigError("export_onnx: opset " + std::to_string(options.opset) + " is not supported (13..21)");
  at::NoGradGuard ng;
  if (!options.float_model && has_fake_quantize(gm)) {  // a prepared model: convert first
    auto converted = convert_fx(gm);
    return export_graph(*converted, options, r);
  }
  return export_graph(gm, options, r);
}
}  // namespace

ExportResult export_onnx(fx::GraphModule& gm, const std::string& path, const ExportOptions& options) {
  ExportResult r;
  const std::string bytes = serialize(gm, options, r);
  write_file_atomic(path, bytes);
  return r;
}

std::string export_onnx_bytes(fx::GraphModule& gm, const ExportOptions& options, ExportResult* result) {
  ExportResult r;
  std::string bytes = serialize(gm, options, r);
  if (result) *result = std::move(r);
  return bytes;
}

void write_encodings(const std::string& path, const ExportResult& result, const std::string& graph_hash,
                     const std::string& backend, const runtime::Model* int8) {
  nlohmann::json enc;
  enc["version"] = 1;  // the format docs/encodings.schema.json describes
  enc["graph_hash"] = graph_hash;
  enc["backend"] = backend;
  enc["activations"] = nlohmann::json::object();
  for (const auto& e : result.encodings)
    enc["activations"][e.tensor] = {{"node", e.node}, {"dtype", e.dtype}, {"scale", e.scale},
                                    {"zero_point", e.zero_point}, {"axis", e.axis}, {"quant_min", e.quant_min},
                                    {"quant_max", e.quant_max}, {"algorithm", e.algorithm},
                                    {"observed_min", e.observed_min}, {"observed_max", e.observed_max}};
  enc["weights"] = nlohmann::json::object();
  for (const auto& e : result.weight_encodings) {
    nlohmann::json w = {{"node", e.node}, {"codes", e.quantized}, {"dtype", e.dtype}, {"scale", e.scale},
                        {"zero_point", e.zero_point}, {"axis", e.axis}, {"quant_min", e.quant_min},
                        {"quant_max", e.quant_max}};
    if (e.block_size > 0) w["block_size"] = e.block_size;
    enc["weights"][e.tensor] = w;
  }
  if (int8) {
    enc["arithmetic"] = nlohmann::json::parse(int8->arithmetic().to_json());
    enc["integer_ops"] = nlohmann::json::object();
    for (const auto& o : int8->integer_ops()) {
      nlohmann::json rs = nlohmann::json::array();
      for (const auto& r : o.rescales) {
        nlohmann::json j = {{"name", r.name}, {"mode", runtime::requant_mode_name(r.mode)}, {"multiplier", r.multiplier}};
        if (r.mode != runtime::RequantMode::kFloat) {
          j["fixed_multiplier"] = r.fixed_multiplier;
          j["shift"] = r.shift;
          j["multiplier_bits"] = r.multiplier_bits;
        }
        rs.push_back(j);
      }
      nlohmann::json j = {{"op", o.op}, {"input_dtype", o.input_dtype}, {"output_dtype", o.output_dtype}, {"rescales", rs}};
      if (o.accumulator_bits) j["accumulator_bits"] = o.accumulator_bits;
      if (o.per_window_count) j["per_window_count"] = true;
      if (!o.table.empty()) j["table"] = o.table;
      enc["integer_ops"][o.node] = j;
    }
  }
  write_file_atomic(path, enc.dump(2) + "\n");
}

}  // namespace qfx::quant
