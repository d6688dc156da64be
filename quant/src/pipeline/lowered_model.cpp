// LoweredModel: the float graph exported once, loaded once.
#include "qfx/quant/lowered_model.h"

#include <utility>

namespace qfx::quant {
namespace {

std::string export_float(fx::GraphModule& gm, const LowerOptions& o, ExportResult* r) {
  ExportOptions eo;
  eo.float_model = true;
  eo.input_shapes = o.input_shapes;
  eo.input_names = o.input_names;
  eo.input_dtypes = o.input_dtypes;
  return export_onnx_bytes(gm, eo, r);
}

runtime::ModelOptions load_options(const LowerOptions& o, const std::vector<ObservedValue>& observed) {
  runtime::ModelOptions mo(o.backend, /*fuse_qdq=*/false);
  for (const auto& v : observed) mo.keep_values.push_back(v.tensor);
  mo.keep_values_any_layout = true;  // each run says how it wants them (Model::WatchLayout)
  return mo;
}

}  // namespace

LoweredModel::LoweredModel(fx::GraphModule& prepared, const LowerOptions& options)
    : LoweredModel(
          [&] {
            ExportResult r;
            std::string bytes = export_float(prepared, options, &r);
            return std::make_pair(std::move(bytes), std::move(r));
          }(),
          options) {}

LoweredModel::LoweredModel(std::pair<std::string, ExportResult> exported, const LowerOptions& options)
    : onnx_(std::move(exported.first)),
      observed_(std::move(exported.second.observed)),
      model_(runtime::Model::load_from_string(onnx_, load_options(options, observed_),
                                              "the float graph of the prepared model")) {
  for (const auto& o : observed_) tensor_of_.emplace(o.node, o.tensor);
}

const std::string* LoweredModel::tensor_of(const std::string& node) const {
  auto it = tensor_of_.find(node);
  return it == tensor_of_.end() ? nullptr : &it->second;
}

}  // namespace qfx::quant
