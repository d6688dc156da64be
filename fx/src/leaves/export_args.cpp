// Arguments of a torch.export program node, by schema name (see export_args.h).
#include "export_args.h"

#include <ATen/core/grad_mode.h>

namespace qfx::fx::detail {

using nlohmann::json;

const json* LeafArgs::arg(const std::string& name) const {
  for (const auto& in : node.at("inputs"))
    if (in.at("name").get<std::string>() == name) return &in.at("arg");
  return nullptr;
}

at::Tensor LeafArgs::tensor(const std::string& name) const {
  const json* j = arg(name);
  if (!j || !j->contains("as_tensor")) {
    if (j && j->contains("as_optional_tensor") && j->at("as_optional_tensor").contains("as_tensor"))
      return tensor_of(j->at("as_optional_tensor").at("as_tensor").at("name").get<std::string>());
    return {};
  }
  return tensor_of(j->at("as_tensor").at("name").get<std::string>());
}

double LeafArgs::num(const std::string& name, double def) const {
  const json* j = arg(name);
  if (!j) return def;
  if (j->contains("as_float")) return j->at("as_float").get<double>();
  if (j->contains("as_int")) return static_cast<double>(j->at("as_int").get<int64_t>());
  return def;
}

int64_t LeafArgs::integer(const std::string& name, int64_t def) const {
  const json* j = arg(name);
  return j && j->contains("as_int") ? j->at("as_int").get<int64_t>() : def;
}

bool LeafArgs::boolean(const std::string& name, bool def) const {
  const json* j = arg(name);
  return j && j->contains("as_bool") ? j->at("as_bool").get<bool>() : def;
}

std::string LeafArgs::string(const std::string& name, const std::string& def) const {
  const json* j = arg(name);
  return j && j->contains("as_string") ? j->at("as_string").get<std::string>() : def;
}

std::vector<int64_t> LeafArgs::int_list(const std::string& name) const {
  const json* j = arg(name);
  if (!j) return {};
  if (j->contains("as_ints")) return j->at("as_ints").get<std::vector<int64_t>>();
  if (j->contains("as_int")) return {j->at("as_int").get<int64_t>()};
  return {};
}

void share(at::Tensor& param, const at::Tensor& t) {
  at::NoGradGuard g;
  param.set_data(t);
}

}  // namespace qfx::fx::detail
