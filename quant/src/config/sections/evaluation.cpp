// The `evaluation:` section: fp32 against int8 on held-out samples.
#include "sections.h"

namespace qfx::quant::sections {

using namespace yaml;

const KeyTable& evaluation_keys() {
  static const KeyTable t{"evaluation", {
      {"data", KeyType::kData, {}, {}, "required", "the evaluation samples", &data_source_keys()},
      {"num_samples", KeyType::kInt, {}, at_least(0), "0", "samples evaluated (0: all)"},
      {"batch_size", KeyType::kInt, {}, at_least(1), "64", "samples per batch, also the latency batch"},
      {"metric", KeyType::kChoice, {"top1", "cosine", "miou", "detection"}, {}, "top1", "what is compared"},
      {"sqnr_samples", KeyType::kInt, {}, at_least(0), "256", "samples of the per-layer SQNR table (0: none)"},
      {"reference_check", KeyType::kInt, {}, {-1, kNoBound, false, false, "must be -1 (all), 0 (off) or a count"}, "0",
       "samples also run on the reference backend, compared bit for bit"},
      {"output", KeyType::kString, {}, {}, "0", "the evaluated output: an index, or a dictionary output's key"},
  }};
  return t;
}

void read_evaluation(const SectionReader& s, JobConfig* c) {
  EvaluationConfig& e = c->evaluation;
  read_samples(s, *c, &e.enabled, &e.data, &e.num_samples, &e.batch_size);
  s.read("sqnr_samples", &e.sqnr_samples);
  s.read("reference_check", &e.reference_check);
  if (auto n = s["output"]) {  // an index, or the key of a dictionary output
    int64_t index = 0;
    if (n.IsScalar() && !YAML::convert<int64_t>::decode(n, index)) {
      e.output_key = as_string(s.path(), n, s.what("output"));
    } else {
      e.output = as_int(s.path(), n, s.what("output"));
      if (e.output < 0) bad(s.path(), n, s.what("output") + " must be >= 0");
    }
  }
  s.read("metric", &e.metric);
  if (e.metric == "top1" && e.data.labels.empty()) bad(s.path(), s["data"], "evaluation.metric top1 needs evaluation.data.labels");
}

}  // namespace qfx::quant::sections
