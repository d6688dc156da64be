// The reference-backend check: the int8 model's outputs on the reference
// kernels against the runtime backend's, bit for bit where no op computes in float.
#include <map>

#include "qfx/runtime/op_schema.h"
#include "stages.h"

namespace qfx::quant::pipeline {
namespace {

// Bit for bit is the claim for int8 ops. Float groups in the int8 model (layers
// kept float, ops without int8 kernels) sum in each backend's own order, so their
// outputs (and codes requantized from them) may differ by rounding. Float ops the
// runtime's op table marks bit_exact (they move values, or dequantize the output)
// are exact everywhere; any other float op (a conv whose input went through a float
// reshape, a sum) counts.
bool exact_everywhere(const std::string& op) {
  const runtime::OpSchema* schema = runtime::find_op_schema(op);
  return schema && schema->bit_exact;
}

// The ops of the int8 model that compute in float32 with sums whose rounding depends
// on the backend, by type ("MatMul x24, Erf x6"); empty: every output is bit-exact.
std::string float_ops(const runtime::Model& int8) {
  std::map<std::string, int> ops;
  for (const auto& k : int8.kernel_report())
    if (!k.folded && k.dtype == "float32" && !exact_everywhere(k.op)) ++ops[k.op];
  std::string s;
  for (const auto& [op, n] : ops) s += (s.empty() ? "" : ", ") + op + " x" + std::to_string(n);
  if (s.empty() && !int8.float_fallbacks().empty()) s = "the float groups listed above";
  return s;
}

}  // namespace

ReferenceCheck reference_check(const Job& job, const Int8Model& int8, Dataset& ev, const at::Tensor& int8_outputs) {
  ReferenceCheck c;
  const int64_t n = ev.size(), ebs = job.cfg.evaluation.batch_size;
  const int64_t nr = job.cfg.evaluation.reference_check < 0 ? n : std::min(job.cfg.evaluation.reference_check, n);
  if (nr <= 0 || job.runtime() == "reference") return c;
  const auto ref_model = runtime::Model::load(int8.parsed, {"reference"});
  for (int64_t i = 0; i < nr; i += ebs) {
    const int64_t end = std::min(i + ebs, nr);
    const at::Tensor r = to_aten(ref_model.run(feed(ref_model, ev.batch_inputs(i, end))).at(int8.output));
    const at::Tensor o = int8_outputs.slice(0, i, end);
    c.identical += (r == o).flatten(1).all(1).sum().item<int64_t>();
    c.max_abs_diff = std::max(c.max_abs_diff, (r - o).abs().max().item<double>());
    progress(job.hooks, "reference backend check", end, nr);
  }
  c.images = nr;
  c.float_ops = float_ops(int8.model);
  c.exact_expected = c.float_ops.empty();
  return c;
}

}  // namespace qfx::quant::pipeline
