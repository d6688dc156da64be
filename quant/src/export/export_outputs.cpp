// export_onnx's graph outputs (see exporter.h): one ONNX output per tensor the model
// returns, named by the caller, by the keys of a returned dictionary, or "output" /
// "output_K".
#include "exporter.h"

namespace qfx::quant::detail {

void Exporter::flatten_outputs(const fx::Argument& a, std::vector<fx::Argument>* outs) {
  if (a.is_node()) outs->push_back(a);
  else
    for (const auto& it : a.items) flatten_outputs(it, outs);
}

bool Exporter::name_taken(const std::string& name) const {
  for (const auto& nd : g_->node())
    for (const auto& o : nd.output())
      if (o == name) return true;
  for (const auto& t : g_->initializer())
    if (t.name() == name) return true;
  for (const auto& in : g_->input())
    if (in.name() == name) return true;
  return false;
}

std::string Exporter::output_name(size_t i, size_t count, const std::vector<std::string>& keys) const {
  if (i < opt_.output_names.size()) return opt_.output_names[i];
  if (keys.size() == count && !keys[i].empty() && !name_taken(keys[i])) return keys[i];
  return count == 1 ? std::string("output") : "output_" + std::to_string(i);
}

void Exporter::output(fx::Node* n) {
  std::vector<fx::Argument> outs;
  flatten_outputs(n->args().at(0), &outs);
  if (outs.empty()) unsupported(*n, "the model returns no tensor");
  const std::vector<std::string> keys = fx::output_keys(gm_.graph());
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string src = value(*n, outs[i]);
    const std::string name = output_name(i, outs.size(), keys);
    node("Identity", {src}, name, "output_" + std::to_string(i));
    auto* vi = g_->add_output();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    // The rank, each dim symbolic (ONNX's checker requires a shape on graph outputs).
    const int rank = rank_of(outs[i]);
    auto* shape = rank >= 0 ? tt->mutable_shape() : nullptr;
    for (int d = 0; d < rank; ++d) shape->add_dim()->set_dim_param(name + "_dim" + std::to_string(d));
  }
}

}  // namespace qfx::quant::detail
