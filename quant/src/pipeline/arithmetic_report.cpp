// The target-arithmetic difference report (ptq's report.json "target_arithmetic").
#include "arithmetic_report.h"

#include <algorithm>
#include <map>
#include <set>

#include "artifacts.h"
#include "qfx/runtime/model.h"

namespace qfx::quant::detail {
using pipeline::to_aten;
using pipeline::feed;

void compare_arithmetic(const runtime::Model& target, const runtime::ParsedModel& parsed, const std::string& backend,
                                  const ExportResult& conv, Dataset& data, int64_t n, int64_t batch, const std::string& output,
                                  bool top1, PtqEvaluation& E) {
  runtime::ModelOptions float_opt(backend);
  float_opt.arithmetic = runtime::Arithmetic{};
  auto onnx = runtime::Model::load(parsed, float_opt);
  const auto names = target.value_names(), fnames = onnx.value_names();
  const std::set<std::string> have(names.begin(), names.end()), fhave(fnames.begin(), fnames.end());
  std::vector<std::string> watch;
  std::map<std::string, std::string> node_of;
  for (const auto& e : conv.encodings)
    if (e.axis < 0 && have.count(e.quantized) && fhave.count(e.quantized) && !node_of.count(e.quantized)) {
      watch.push_back(e.quantized);
      node_of[e.quantized] = e.node;
    }
  std::map<std::string, runtime::Tensor> held;  // target's codes of the batch in flight
  std::map<std::string, ArithmeticLayerDiff> diff;
  const at::Tensor labels = top1 ? data.labels() : at::Tensor();
  int64_t correct = 0;
  const int64_t total = labels.defined() ? data.size() : n;
  for (int64_t i = 0; i < total; i += batch) {
    const int64_t end = std::min(i + batch, total);
    const std::map<std::string, runtime::Tensor> in = feed(onnx, data.batch_inputs(i, end));
    const bool layers = i < n;
    auto out = onnx.run(in, layers ? watch : std::vector<std::string>{}, [&](const std::string& name, const runtime::Tensor& t) {
      held[name] = t.clone();
    });
    if (labels.defined())
      correct += to_aten(out.at(output)).argmax(1).eq(labels.slice(0, i, end)).sum().item<int64_t>();
    if (!layers) continue;
    target.run(in, watch, [&](const std::string& name, const runtime::Tensor& t) {
      const runtime::Tensor& f = held.at(name);
      ArithmeticLayerDiff& d = diff[name];
      d.node = node_of.at(name);
      auto code = [](const runtime::Tensor& x, int64_t k) -> int {
        if (x.dtype() == runtime::DType::kUInt8) return x.data<uint8_t>()[k];
        if (x.dtype() == runtime::DType::kInt16) return x.data<int16_t>()[k];
        return x.data<int8_t>()[k];
      };
      for (int64_t k = 0; k < t.numel(); ++k) {
        const int a = code(t, k), b = code(f, k);
        d.codes += 1;
        d.differing += a != b;
        d.max_abs_diff = std::max(d.max_abs_diff, std::abs(a - b));
      }
    });
  }
  E.arithmetic_layers.clear();
  for (const auto& kv : diff) E.arithmetic_layers.push_back(kv.second);
  std::sort(E.arithmetic_layers.begin(), E.arithmetic_layers.end(), [](const auto& a, const auto& b) {
    return a.differing * std::max<int64_t>(b.codes, 1) > b.differing * std::max<int64_t>(a.codes, 1);
  });
  E.arithmetic = target.arithmetic().to_json();
  E.arithmetic_images = std::min(n, total);
  if (labels.defined()) {
    E.has_top1_float_requant = true;
    E.top1_float_requant = static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(total, 1));
  }
}

}  // namespace qfx::quant::detail
