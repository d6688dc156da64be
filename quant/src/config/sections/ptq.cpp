// The `ptq:` section: the accuracy algorithms qfx ptq runs on calibration data.
#include "ptq_fallback.h"
#include "ptq_mixed.h"
#include "sections.h"

namespace qfx::quant::sections {

using namespace yaml;

namespace {

const KeyTable& samples_keys() {
  static const KeyTable t{"ptq.sensitivity / ptq.bias_correction", {
      {"num_samples", KeyType::kInt, {}, at_least(1), "256", "calibration samples it runs on"},
  }};
  return t;
}

const KeyTable& smoothquant_keys() {
  static const KeyTable t{"ptq.smoothquant", {
      {"alpha", KeyType::kNumber, {}, {0, 1, true, true, "must be in (0, 1)"}, "0.5", "migration strength"},
      {"num_samples", KeyType::kInt, {}, at_least(1), "256", "calibration samples for the channel ranges"},
  }};
  return t;
}

const KeyTable& range_search_keys() {
  static const KeyTable t{"ptq.range_search", {
      {"candidates", KeyType::kList, {"minmax", "percentile", "entropy", "kl", "mse", "auto"}, {},
       "[minmax, percentile, entropy, mse, auto]", "the range algorithms tried"},
      {"num_samples", KeyType::kInt, {}, at_least(1), "256", "calibration samples each candidate runs on"},
      {"per_tensor", KeyType::kBool, {}, {}, "false", "one more pass choosing per activation"},
  }};
  return t;
}

const KeyTable& adaround_keys() {
  static const KeyTable t{"ptq.adaround", {
      {"iterations", KeyType::kInt, {}, at_least(1), "1000", "optimisation steps per layer"},
      {"lr", KeyType::kNumber, {}, {0, kNoBound, true, false, "must be positive"}, "0.01", "Adam's learning rate"},
      {"reg", KeyType::kNumber, {}, {0, kNoBound, false, false, "must be >= 0"}, "0.01", "the rounding regulariser's weight"},
      {"beta", KeyType::kList, {}, {}, "[20, 2]", "the regulariser's annealing [start, end], start >= end > 0"},
      {"warmup", KeyType::kNumber, {}, {0, 1, false, true, "must be in [0, 1)"}, "0.2", "share of iterations without the regulariser"},
      {"batch_size", KeyType::kInt, {}, at_least(1), "32", "samples per step"},
      {"num_samples", KeyType::kInt, {}, at_least(1), "256", "calibration samples"},
      {"seed", KeyType::kInt, {}, at_least(0), "0", "the sample draw"},
  }};
  return t;
}

const KeyTable& gptq_keys() {
  static const KeyTable t{"ptq.gptq", {
      {"damp", KeyType::kNumber, {}, {0, 1, false, false, "must be in [0, 1]"}, "0.01", "share of mean(diag H) added to H's diagonal"},
      {"lazy_batch", KeyType::kInt, {}, at_least(1), "128", "columns per lazy batch (speed only)"},
      {"act_order", KeyType::kBool, {}, {}, "false", "columns by descending diag(H); static groups for block-wise weights"},
      {"num_samples", KeyType::kInt, {}, at_least(1), "128", "calibration samples the Hessians sum over"},
  }};
  return t;
}

const KeyTable& awq_keys() {
  static const KeyTable t{"ptq.awq", {
      {"grid", KeyType::kInt, {}, at_least(1), "20", "ratios searched: 0, 1/grid, ..., (grid-1)/grid"},
      {"num_samples", KeyType::kInt, {}, at_least(1), "128", "calibration samples the search runs on"},
      {"clip", KeyType::kBool, {}, {}, "true", "the weight-clipping search after the scales"},
      {"max_shrink", KeyType::kNumber, {}, {0, 1, false, false, "must be in [0, 1]"}, "0.5",
       "the most the clipping search shrinks a block's range"},
      {"clip_tokens", KeyType::kInt, {}, at_least(1), "512", "input rows the clipping search uses"},
  }};
  return t;
}

// A kSwitch key: `true` / `false`, or its mapping (read by `read_options`), which turns it on.
template <typename ReadOptions>
void read_switch(const SectionReader& p, const std::string& key, bool* on, const KeyTable& keys, ReadOptions&& read_options) {
  const YAML::Node v = p[key];
  if (!v) return;
  if (!v.IsMap()) {
    *on = as_bool(p.path(), v, p.what(key));
    return;
  }
  *on = true;
  read_options(SectionReader(p.path(), v, p.what(key), keys));
}

void read_range_search_options(const SectionReader& s, RangeSearchOptions* o) {
  s.read("per_tensor", &o->per_tensor);
  if (auto n = s["candidates"]) {
    if (!n.IsSequence() || n.size() == 0)
      bad(s.path(), n, "ptq.range_search.candidates must be a list: [minmax, percentile, entropy, mse, auto]");
    o->candidates.clear();
    for (const auto& e : n) o->candidates.push_back(parse_algorithm(as_choice(s.path(), e, s.what("candidates"), s.key("candidates").choices)));
  }
  s.read("num_samples", &o->num_samples);
}

void read_adaround_options(const SectionReader& s, AdaRoundOptions* o) {
  s.read("iterations", &o->iterations);
  s.read("batch_size", &o->batch_size);
  s.read("num_samples", &o->num_samples);
  int64_t seed = static_cast<int64_t>(o->seed);
  s.read("seed", &seed);
  o->seed = static_cast<uint64_t>(seed);
  s.read("lr", &o->lr);
  s.read("reg", &o->reg);
  s.read("warmup", &o->warmup);
  if (auto n = s["beta"]) {
    const auto b = read_doubles(s.path(), n, s.what("beta"));
    if (b.size() != 2 || !(b[0] >= b[1]) || !(b[1] > 0)) bad(s.path(), n, "ptq.adaround.beta must be [start, end] with start >= end > 0");
    o->beta_start = b[0];
    o->beta_end = b[1];
  }
}

}  // namespace

const KeyTable& ptq_keys() {
  static const KeyTable t{"ptq", {
      {"cross_layer_equalization", KeyType::kBool, {}, {}, "false", "cross-layer equalisation before calibration"},
      {"smoothquant", KeyType::kSwitch, {}, {}, "false", "SmoothQuant on LayerNorm -> Linear before calibration", &smoothquant_keys()},
      {"awq", KeyType::kSwitch, {}, {}, "false", "AWQ's activation-aware scales for Linear weights before calibration",
       &awq_keys()},
      {"range_search", KeyType::kSwitch, {}, {}, "false", "the range algorithm with the best output SQNR", &range_search_keys()},
      {"sensitivity", KeyType::kSwitch, {}, {}, "false", "per-layer sensitivity in report.json", &samples_keys()},
      {"adaround", KeyType::kSwitch, {}, {}, "false", "AdaRound after calibration", &adaround_keys()},
      {"gptq", KeyType::kSwitch, {}, {}, "false", "GPTQ on Linear weights after calibration", &gptq_keys()},
      {"bias_correction", KeyType::kSwitch, {}, {}, "false", "empirical bias correction after AdaRound", &samples_keys()},
      {"auto_fallback", KeyType::kSwitch, {}, {}, "false", "the most sensitive layers to float until within the target",
       &auto_fallback_keys()},
      {"mixed_precision", KeyType::kSwitch, {}, {}, "false", "one precision per layer within a weight-size / latency budget",
       &mixed_precision_keys()},
  }};
  return t;
}

void read_ptq(const SectionReader& p, JobConfig* c) {
  PtqAlgorithmsConfig& a = c->ptq;
  read_switch(p, "sensitivity", &a.sensitivity, samples_keys(), [&](const SectionReader& s) { s.read("num_samples", &a.sensitivity_samples); });
  read_switch(p, "bias_correction", &a.bias_correction, samples_keys(),
              [&](const SectionReader& s) { s.read("num_samples", &a.bias_correction_samples); });
  p.read("cross_layer_equalization", &a.cross_layer_equalization);
  read_switch(p, "smoothquant", &a.smoothquant, smoothquant_keys(), [&](const SectionReader& s) {
    s.read("alpha", &a.smoothquant_alpha);
    s.read("num_samples", &a.smoothquant_samples);
  });
  read_switch(p, "awq", &a.awq, awq_keys(), [&](const SectionReader& s) {
    s.read("grid", &a.awq_options.grid);
    s.read("num_samples", &a.awq_options.num_samples);
    s.read("clip", &a.awq_options.clip);
    s.read("max_shrink", &a.awq_options.max_shrink);
    s.read("clip_tokens", &a.awq_options.clip_tokens);
  });
  read_switch(p, "range_search", &a.range_search, range_search_keys(),
              [&](const SectionReader& s) { read_range_search_options(s, &a.range_search_options); });
  read_switch(p, "adaround", &a.adaround, adaround_keys(), [&](const SectionReader& s) { read_adaround_options(s, &a.adaround_options); });
  read_switch(p, "gptq", &a.gptq, gptq_keys(), [&](const SectionReader& s) {
    s.read("damp", &a.gptq_options.damp);
    s.read("lazy_batch", &a.gptq_options.lazy_batch);
    s.read("act_order", &a.gptq_options.act_order);
    s.read("num_samples", &a.gptq_options.num_samples);
  });
  if (a.gptq && a.adaround)
    bad(p.path(), p["gptq"], "ptq.gptq and ptq.adaround both choose the weights' rounding; turn one of them off");
  if (p["auto_fallback"]) read_auto_fallback(p, c);
  if (p["mixed_precision"]) read_mixed_precision(p, c);
}

}  // namespace qfx::quant::sections
