// ptq.mixed_precision: {candidates, block_size, budget: {weight_bytes, effective_bits,
// latency}, num_samples}.
#include "ptq_mixed.h"

namespace qfx::quant::sections {

using namespace yaml;

namespace {

const KeyTable& budget_keys() {
  static const KeyTable t{"ptq.mixed_precision.budget", {
      {"weight_bytes", KeyType::kInt, {}, at_least(1), "none", "largest weight size of the searched layers, bytes"},
      {"effective_bits", KeyType::kNumber, {}, {1, 32, false, false, "must be in [1, 32]"}, "none",
       "largest mean bits per weight (codes, scales and zero points)"},
      {"latency", KeyType::kNumber, {}, {0, kNoBound, true, false, "must be positive"}, "none",
       "largest estimated latency, relative to every searched layer in w8a8 (the target's mac_cost)"},
  }};
  return t;
}

}  // namespace

const KeyTable& mixed_precision_keys() {
  static const KeyTable t{"ptq.mixed_precision", {
      {"candidates", KeyType::kList, {}, {}, "[w4a8, w8a8, float]", "precisions a layer may take: w<bits>, w<bits>a8, w<bits>a16, float"},
      {"block_size", KeyType::kInt, {}, {0, 4096, false, false, "must be in [0, 4096]"}, "128",
       "input channels per scale of weights below 8 bits (0: per channel)"},
      {"budget", KeyType::kMapping, {}, {}, "none (required)", "weight_bytes, effective_bits and / or latency", &budget_keys()},
      {"num_samples", KeyType::kInt, {}, at_least(1), "64", "calibration samples the sensitivities are measured on"},
  }};
  return t;
}

void read_mixed_precision(const SectionReader& p, JobConfig* c) {
  PtqAlgorithmsConfig& a = c->ptq;
  const YAML::Node v = p["mixed_precision"];
  if (!v.IsMap()) {
    if (as_bool(p.path(), v, p.what("mixed_precision")))
      bad(p.path(), v, "ptq.mixed_precision needs its budget: {budget: {effective_bits: 4.8}} (weight_bytes, effective_bits, latency)");
    return;
  }
  a.mixed_precision = true;
  MixedPrecisionOptions& o = a.mixed_precision_options;
  const SectionReader s(p.path(), v, p.what("mixed_precision"), mixed_precision_keys());
  if (auto n = s["candidates"]) {
    if (!n.IsSequence() || n.size() < 2) bad(s.path(), n, "ptq.mixed_precision.candidates must list at least two: [w4a8, w8a8, float]");
    o.candidates.clear();
    for (const auto& e : n) {
      const std::string name = as_string(s.path(), e, s.what("candidates"));
      for (const auto& prev : o.candidates)
        if (prev == name) bad(s.path(), e, "ptq.mixed_precision.candidates: '" + name + "' is listed twice");
      try {
        PrecisionCandidate::parse(name, s.what("candidates"));
      } catch (const ConfigError& err) {
        bad(s.path(), e, err.what());
      }
      o.candidates.push_back(name);
    }
  }
  s.read("block_size", &o.block_size);
  if (o.block_size != 0 && o.block_size < 8) bad(s.path(), s["block_size"], "ptq.mixed_precision.block_size must be 0 or 8..4096");
  s.read("num_samples", &o.num_samples);
  if (!s["budget"])
    bad(s.path(), v, "ptq.mixed_precision.budget is required: {effective_bits: 4.8} (weight_bytes, effective_bits, latency)");
  const SectionReader b(s.path(), s["budget"], s.what("budget"), budget_keys());
  b.read("weight_bytes", &o.weight_bytes);
  b.read("effective_bits", &o.effective_bits);
  b.read("latency", &o.latency);
  if (o.weight_bytes <= 0 && o.effective_bits <= 0 && o.latency <= 0)
    bad(s.path(), s["budget"], "ptq.mixed_precision.budget needs weight_bytes, effective_bits or latency");
  if (a.auto_fallback)
    bad(p.path(), v, "ptq.mixed_precision and ptq.auto_fallback both choose each layer's precision; turn one of them off");
}

}  // namespace qfx::quant::sections
