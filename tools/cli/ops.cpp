#include "ops.h"

#include <cstdio>

#include "qfx/quant/backend_config.h"
#include "qfx/quant/op_catalog.h"

namespace qfx::cli {
namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ",") + e;
  return s.empty() ? "-" : s;
}

std::string kinds(const std::vector<quant::OpKind>& v) {
  std::vector<std::string> names;
  for (auto k : v) names.push_back(quant::op_kind_name(k));
  return joined(names);
}

}  // namespace

int print_ops(const std::string& backend) {
  const auto& c = quant::op_catalog();
  quant::BackendConfig b;
  if (!backend.empty()) b = quant::BackendConfig::resolve(backend);
  std::printf("%-20s %-28s %-18s %-30s %-6s %-10s %-62s%s\n", "op", "aten spellings", "modules", "categories", "onnx", "int8 form",
              "what it computes", backend.empty() ? "" : ("  " + b.name).c_str());
  for (const auto& [name, r] : c.records()) {
    const std::string opset = r.onnx.empty() ? "-" : ">=" + std::to_string(r.onnx.front().since_opset);
    const std::string form = !r.table_onnx.empty() ? "table" : !r.integer_only_onnx.empty() ? "int-only" : "-";
    std::string target;
    if (!backend.empty()) target = r.kinds.empty() ? "  -" : "  " + std::string(quant::op_kind_name(b.op(name).kind));
    const std::string what = r.summary.size() > 62 ? r.summary.substr(0, 59) + "..." : r.summary;
    std::printf("%-20s %-28s %-18s %-30s %-6s %-10s %-62s%s\n", name.c_str(), joined(r.aten).c_str(), joined(r.modules).c_str(),
                r.kinds.empty() ? "(float only)" : kinds(r.kinds).c_str(), opset.c_str(), form.c_str(), what.c_str(), target.c_str());
  }
  std::printf("%zu ops. categories: what a backend YAML's ops: may give the op (float only: not a YAML key; size,\n"
              "getitem and other shape arithmetic, or float math between quantized groups); onnx: the lowest opset it exports at;\n"
              "int8 form: a 256-entry table (arithmetic.lut) or I-BERT's integer-only form (arithmetic.integer_only).\n",
              c.records().size());
  return 0;
}

}  // namespace qfx::cli
