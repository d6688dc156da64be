// ptq.auto_fallback: true, or {metric, tolerance, min_sqnr_db, candidates,
// max_layers, ranking_samples, num_samples, data}.
#include "ptq_fallback.h"

namespace qfx::quant::sections {

using namespace yaml;

const KeyTable& auto_fallback_keys() {
  static const KeyTable t{"ptq.auto_fallback", {
      {"metric", KeyType::kChoice, {"top1", "sqnr"}, {}, "top1", "the held-out metric"},
      {"tolerance", KeyType::kNumber, {}, {0, 100, false, false, "must be in [0, 100] (points of top-1)"}, "0.3",
       "top1: points below fp32 allowed"},
      {"min_sqnr_db", KeyType::kNumber, {}, {}, "30", "sqnr: the output SQNR to reach, dB"},
      {"candidates", KeyType::kList, {"int16", "float"}, {}, "[int16, float]", "what a moved layer becomes, first offered wins"},
      {"max_layers", KeyType::kInt, {}, at_least(0), "5", "most layers moved"},
      {"num_samples", KeyType::kInt, {}, at_least(1), "1000", "held-out samples"},
      {"ranking_samples", KeyType::kInt, {}, at_least(1), "256", "calibration samples ranking the layers"},
      {"data", KeyType::kData, {}, {}, "the calibration data's rest", "held-out samples of their own", &data_source_keys()},
  }};
  return t;
}

namespace {

void read_options(const SectionReader& s, JobConfig* c) {
  PtqAlgorithmsConfig& a = c->ptq;
  AutoFallbackOptions& o = a.auto_fallback_options;
  s.read("metric", &o.metric);
  s.read("tolerance", &o.tolerance);
  s.read("min_sqnr_db", &o.min_sqnr_db);
  if (auto n = s["candidates"]) {
    if (!n.IsSequence() || n.size() == 0) bad(s.path(), n, "ptq.auto_fallback.candidates must be a list: [int16, float]");
    o.candidates.clear();
    for (const auto& e : n) o.candidates.push_back(as_choice(s.path(), e, s.what("candidates"), s.key("candidates").choices));
  }
  s.read("max_layers", &o.max_layers);
  s.read("ranking_samples", &o.ranking_samples);
  s.read("num_samples", &a.auto_fallback_samples);
  if (auto n = s["data"]) a.auto_fallback_data = read_data(s.path(), n, s.what("data"), c->model.inputs);
}

}  // namespace

void read_auto_fallback(const SectionReader& p, JobConfig* c) {
  PtqAlgorithmsConfig& a = c->ptq;
  const YAML::Node v = p["auto_fallback"];
  if (!v.IsMap()) {
    a.auto_fallback = as_bool(p.path(), v, p.what("auto_fallback"));
  } else {
    a.auto_fallback = true;
    read_options(SectionReader(p.path(), v, p.what("auto_fallback"), auto_fallback_keys()), c);
  }
  if (!a.auto_fallback || a.auto_fallback_options.metric != "top1") return;
  const bool own = a.auto_fallback_data.given();
  const std::string& labels = own ? a.auto_fallback_data.labels : c->calibration.data.labels;
  if (labels.empty())
    bad(p.path(), v, own ? "ptq.auto_fallback.metric top1 needs ptq.auto_fallback.data.labels"
                         : "ptq.auto_fallback.metric top1 needs labels for the held-out samples: set calibration.data.labels, "
                           "or ptq.auto_fallback.data, or metric: sqnr");
}

}  // namespace qfx::quant::sections
