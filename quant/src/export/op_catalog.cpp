#include "qfx/quant/op_catalog.h"

#include <algorithm>
#include <set>

#include "qfx/error.h"
#include "op_families.h"

namespace qfx::quant {

OpRecord& OpRecord::to_onnx(std::function<void(detail::Exporter&, fx::Node&)> f,
                            std::function<void(detail::Exporter&, fx::Node&, torch::nn::Module&)> m, int since_opset) {
  OnnxExport x;
  x.since_opset = since_opset;
  x.function = std::move(f);
  x.module = std::move(m);
  auto at = std::upper_bound(onnx.begin(), onnx.end(), since_opset,
                             [](int v, const OnnxExport& e) { return v < e.since_opset; });
  onnx.insert(at, std::move(x));
  return *this;
}

OpRecord& OpRecord::writes(const std::vector<std::string>& ops) {
  for (const auto& o : ops)
    if (std::find(onnx_ops.begin(), onnx_ops.end(), o) == onnx_ops.end()) onnx_ops.push_back(o);
  return *this;
}

const std::vector<std::string>& core_onnx_ops() {
  // Exporter::quant_dequant (Clip: a sub-8-bit range), Exporter::weighted with
  // its fused activation, Exporter::output, Exporter::operand_as (Cast).
  static const std::vector<std::string> ops = {"QuantizeLinear", "DequantizeLinear", "Clip", "Conv", "ConvTranspose",
                                               "Gemm", "MatMul", "Add", "Relu", "Identity", "Cast"};
  return ops;
}

std::vector<std::string> emitted_onnx_ops() {
  std::set<std::string> all(core_onnx_ops().begin(), core_onnx_ops().end());
  for (const auto& [name, r] : op_catalog().records()) all.insert(r.onnx_ops.begin(), r.onnx_ops.end());
  return {all.begin(), all.end()};
}

std::vector<OpKind> weighted_kinds() { return {OpKind::kWeighted, OpKind::kFloat}; }

std::vector<OpKind> activation_kinds() { return {OpKind::kQuantized, OpKind::kShare, OpKind::kFixed, OpKind::kFloat}; }

void OpCatalog::add(OpRecord r) {
  auto claim = [&](std::map<std::string, std::string>& m, const std::string& key, const char* what) {
    auto [it, fresh] = m.emplace(key, r.name);
    if (!fresh && it->second != r.name)
      throw InternalError("op catalog: " + std::string(what) + " '" + key + "' of '" + r.name + "' is already '" + it->second + "'");
  };
  for (const auto& a : r.aten) claim(aten_, a, "aten spelling");
  for (const auto& m : r.modules) claim(modules_, m, "module class");
  const std::string name = r.name;
  if (!records_.emplace(name, std::move(r)).second) throw InternalError("op catalog: op '" + name + "' registered twice");
}

const OpRecord* OpCatalog::find(const std::string& name) const {
  auto it = records_.find(name);
  return it == records_.end() ? nullptr : &it->second;
}

std::string OpCatalog::name_of_aten(const std::string& aten) const {
  auto it = aten_.find(aten);
  return it == aten_.end() ? std::string() : it->second;
}

std::string OpCatalog::name_of_module(const std::string& cls) const {
  auto it = modules_.find(cls);
  return it == modules_.end() ? std::string() : it->second;
}

const OnnxExport* OpCatalog::onnx_export(const std::string& name, int opset) const {
  const OpRecord* r = find(name);
  if (!r) return nullptr;
  const OnnxExport* best = nullptr;
  for (const auto& x : r->onnx)
    if (x.since_opset <= opset) best = &x;
  return best;
}

FusionRole OpCatalog::fusion_role(const std::string& name) const {
  const OpRecord* r = find(name);
  return r ? r->fusion : FusionRole::kNone;
}

std::vector<std::string> OpCatalog::configurable_names() const {
  std::vector<std::string> out;
  for (const auto& [name, r] : records_)
    if (!r.kinds.empty()) out.push_back(name);
  return out;
}

const OpCatalog& op_catalog() {
  static const OpCatalog c = [] {
    OpCatalog k;
    detail::register_layer_ops(k);
    detail::register_activation_ops(k);
    detail::register_elementwise_ops(k);
    detail::register_shape_ops(k);
    detail::register_pool_ops(k);
    detail::register_norm_ops(k);
    detail::register_transformer_ops(k);
    detail::register_resize_ops(k);
    detail::register_rnn_ops(k);
    detail::register_gather_ops(k);
    detail::register_reduce_ops(k);
    detail::register_scatter_ops(k);
    detail::register_creation_ops(k);
    detail::register_unary_ops(k);
    return k;
  }();
  return c;
}

}  // namespace qfx::quant
