// qfx_op_check: the generated Core ATen op test's driver. For every case that
// tests/ops/core_aten_cases.py wrote (a one-op torch.export program, its inputs and
// PyTorch's outputs), it loads the program as `qfx ptq` does, runs the fx graph
// (libtorch's kernels), exports it as a float ONNX model with the dynamic batch, runs
// that on qfx's runtime at another batch, and compares both with PyTorch (1e-5
// relative and 1e-5 absolute; integer and bool outputs exactly). An op passes when
// every one of its cases does. A case may also stop with qfx's UnsupportedOpError
// (the exporter's names the fx node, the runtime's the ONNX node); anything else (a wrong result, another exception) fails the test.
//
// Usage: qfx_op_check CASES_DIR CLAIMED_MD [RESULTS_JSON]
// CLAIMED_MD is docs/fx.md: the rows between "<!-- core-aten:begin -->" and
// "<!-- core-aten:end -->" whose first cell is `op`. The claimed set must equal the set
// of ops that pass. Exit 0 when it does and nothing failed, 1 otherwise.
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "qfx/error.h"
#include "qfx/fx/graph_module.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/convert.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/npy.h"
#include "qfx/runtime/registry.h"

namespace {

namespace fs = std::filesystem;
using qfx::runtime::DType;

at::ScalarType scalar_type(DType d) {
  switch (d) {
    case DType::kFloat32: return at::kFloat;
    case DType::kInt64: return at::kLong;
    case DType::kInt32: return at::kInt;
    case DType::kBool: return at::kBool;
    case DType::kInt8: return at::kChar;
    case DType::kUInt8: return at::kByte;
    case DType::kInt16: return at::kShort;
  }
  return at::kFloat;
}

at::Tensor to_aten(const qfx::runtime::Tensor& t) {
  return at::from_blob(const_cast<void*>(t.raw()), t.shape(), scalar_type(t.dtype())).clone();
}

qfx::runtime::Tensor to_runtime(const at::Tensor& a) {
  static const std::map<at::ScalarType, DType> d = {
      {at::kFloat, DType::kFloat32}, {at::kLong, DType::kInt64}, {at::kInt, DType::kInt32}, {at::kBool, DType::kBool}};
  const at::Tensor c = a.contiguous();
  qfx::runtime::Tensor t(c.sizes().vec(), d.at(c.scalar_type()));
  std::memcpy(t.raw(), c.data_ptr(), t.nbytes());
  return t;
}

// "" when `got` matches PyTorch's `want`, else what differs.
std::string compare(const at::Tensor& got, const at::Tensor& want) {
  if (got.sizes() != want.sizes())
    return "shape " + c10::str(got.sizes()) + ", PyTorch " + c10::str(want.sizes());
  if (!at::isFloatingType(want.scalar_type())) {
    if (got.scalar_type() != want.scalar_type())
      return std::string("dtype ") + c10::toString(got.scalar_type()) + ", PyTorch " + c10::toString(want.scalar_type());
    return at::equal(got, want) ? "" : "values differ";
  }
  if (!at::isFloatingType(got.scalar_type())) return std::string("dtype ") + c10::toString(got.scalar_type()) + ", PyTorch float";
  const at::Tensor g = got.to(at::kFloat), w = want.to(at::kFloat);
  if (at::allclose(g, w, 1e-5, 1e-5, /*equal_nan=*/true)) return "";
  const at::Tensor finite = at::isfinite(w) & at::isfinite(g);
  const double err = finite.any().item<bool>() ? (g - w).abs().masked_select(finite).max().item<double>() : 0.0;
  return "values differ (max abs error " + std::to_string(err) + ")";
}

struct Case {
  std::string name, op;
  std::vector<at::Tensor> inputs, outputs;
  std::vector<std::vector<int64_t>> shapes;  // -1: the dynamic batch
  std::vector<std::string> dtypes;
};

struct Outcome {
  std::string status;  // pass, unsupported, fail
  std::string detail;
  std::set<std::string> onnx_ops;
};

Case read_case(const fs::path& dir, const nlohmann::json& j) {
  Case c{j["case"], j["op"], {}, {}, {}, {}};
  for (size_t i = 0; i < j["inputs"].size(); ++i) {
    c.inputs.push_back(to_aten(qfx::runtime::load_npy((dir / ("in" + std::to_string(i) + ".npy")).string())));
    c.shapes.push_back(j["inputs"][i]["shape"].get<std::vector<int64_t>>());
    c.dtypes.push_back(j["inputs"][i]["dtype"]);
  }
  for (int k = 0; k < j["outputs"].get<int>(); ++k)
    c.outputs.push_back(to_aten(qfx::runtime::load_npy((dir / ("out" + std::to_string(k) + ".npy")).string())));
  return c;
}

std::vector<at::Tensor> tensors_of(const c10::IValue& v) {
  if (v.isTensor()) return {v.toTensor()};
  std::vector<at::Tensor> out;
  if (v.isTuple())
    for (const auto& e : v.toTupleRef().elements()) out.push_back(e.toTensor());
  else if (v.isList())
    for (const auto& e : v.toListRef()) out.push_back(e.toTensor());
  return out;
}

// "" when every output matches, else which one differs and how.
std::string compare_all(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
  if (got.size() != want.size()) return std::to_string(got.size()) + " outputs, PyTorch " + std::to_string(want.size());
  for (size_t k = 0; k < got.size(); ++k)
    if (std::string d = compare(got[k], want[k]); !d.empty()) return "output " + std::to_string(k) + ": " + d;
  return "";
}

Outcome run_case(const fs::path& dir, const Case& c) {
  qfx::fx::TracerOptions to;
  to.input_shapes = c.shapes;
  to.input_dtypes = c.dtypes;
  auto gm = qfx::fx::trace_file((dir / "model.pt2").string(), to);
  gm->eval();
  std::vector<c10::IValue> in(c.inputs.begin(), c.inputs.end());
  if (std::string d = compare_all(tensors_of(gm->forward(in)), c.outputs); !d.empty())
    return {"fail", "fx graph: " + d, {}};
  qfx::quant::ExportOptions o;
  o.input_shapes = c.shapes;
  o.input_dtypes = c.dtypes;
  o.opset = 17;
  o.float_model = true;
  const std::string bytes = qfx::quant::export_onnx_bytes(*gm, o, nullptr);
  Outcome r{"pass", "", {}};
  const auto model = qfx::runtime::Model::load_from_string(bytes);
  std::set<std::string> nodes;
  for (const auto& k : model.kernel_report()) {
    r.onnx_ops.insert(k.op);
    if (!nodes.insert(k.node).second) return {"fail", "two ONNX nodes named '" + k.node + "' (ONNX Runtime refuses the model)", r.onnx_ops};
  }
  std::map<std::string, qfx::runtime::Tensor> feed;
  for (size_t i = 0; i < model.inputs().size(); ++i) feed.emplace(model.inputs()[i].name, to_runtime(c.inputs.at(i)));
  const auto out = model.run(feed);
  std::vector<at::Tensor> got;
  for (const auto& info : model.outputs()) got.push_back(to_aten(out.at(info.name)));
  if (std::string d = compare_all(got, c.outputs); !d.empty()) return {"fail", "runtime: " + d, r.onnx_ops};
  return r;
}

Outcome guarded(const fs::path& dir, const Case& c) {
  try {
    return run_case(dir, c);
  } catch (const qfx::UnsupportedOpError& e) {
    return {"unsupported", e.what(), {}};
  } catch (const std::exception& e) {
    return {"fail", std::string("not a qfx UnsupportedOpError: ") + e.what(), {}};
  }
}

// The ops docs/fx.md claims: first cells of the marked table's rows.
std::set<std::string> claimed_ops(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw qfx::IoError(path + ": cannot read");
  std::set<std::string> ops;
  std::string line;
  bool inside = false;
  const std::regex row("^\\| *`([a-z0-9_]+)` *\\|");
  while (std::getline(in, line)) {
    if (line.find("<!-- core-aten:begin -->") != std::string::npos) inside = true;
    if (line.find("<!-- core-aten:end -->") != std::string::npos) inside = false;
    std::smatch m;
    if (inside && std::regex_search(line, m, row)) ops.insert(m[1]);
  }
  return ops;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: qfx_op_check CASES_DIR CLAIMED_MD [RESULTS_JSON]\n";
    return 2;
  }
  const fs::path dir = argv[1];
  std::ifstream mf(dir / "manifest.json");
  const nlohmann::json manifest = nlohmann::json::parse(mf);
  const std::set<std::string> claimed = claimed_ops(argv[2]);
  std::map<std::string, std::vector<std::pair<std::string, Outcome>>> by_op;
  int failed = 0;
  for (const auto& j : manifest["cases"]) {
    const fs::path cd = dir / j["case"].get<std::string>();
    const Case c = read_case(cd, j);
    const Outcome r = guarded(cd, c);
    if (r.status == "fail") ++failed;
    std::cout << r.status << " " << c.name << " (" << c.op << ")" << (r.detail.empty() ? "" : ": " + r.detail) << "\n";
    by_op[c.op].emplace_back(c.name, r);
  }
  std::set<std::string> passing;
  nlohmann::json results = nlohmann::json::object();
  for (const auto& [op, cases] : by_op) {
    bool all = true;
    std::set<std::string> onnx;
    for (const auto& [name, r] : cases) {
      all = all && r.status == "pass";
      onnx.insert(r.onnx_ops.begin(), r.onnx_ops.end());
      results[op]["cases"][name] = {{"status", r.status}, {"detail", r.detail}};
    }
    results[op]["onnx"] = onnx;
    results[op]["supported"] = all;
    if (all) passing.insert(op);
  }
  // The docs list the Core ATen ops that pass; the few other ops with cases (spellings
  // of exported programs, such as unbind) are checked, not listed.
  const std::set<std::string> core = manifest["core_ops"].get<std::set<std::string>>();
  int drift = 0;
  for (const auto& op : claimed)
    if (!passing.count(op)) std::cout << "claimed in docs but not passing: " << op << "\n", ++drift;
  for (const auto& op : passing)
    if (core.count(op) && !claimed.count(op)) std::cout << "passing but not listed in docs: " << op << "\n", ++drift;
  size_t core_passing = 0;
  for (const auto& op : passing) core_passing += core.count(op);
  const size_t names = core.size();
  std::cout << "Core ATen coverage: " << core_passing << " of " << names << " operator names supported ("
            << by_op.size() << " with cases); " << failed << " case(s) failed\n";
  if (argc > 3) std::ofstream(argv[3]) << results.dump(1) << "\n";
  return failed == 0 && drift == 0 ? 0 : 1;
}
