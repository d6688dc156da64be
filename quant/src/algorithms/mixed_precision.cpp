// Mixed precision under a budget (see mixed_precision.h).
#include "qfx/quant/mixed_precision.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <regex>

#include "mixed_precision_layers.h"
#include "qfx/error.h"

namespace qfx::quant {

PrecisionCandidate PrecisionCandidate::parse(const std::string& name, const std::string& what) {
  PrecisionCandidate c;
  c.name = name;
  if (name == "float") return c;
  static const std::regex re("w([2-8])(a(8|16))?");
  std::smatch m;
  if (!std::regex_match(name, m, re))
    throw ConfigError(what + ": '" + name + "' is not a precision: w<bits> (bits 2..8), w<bits>a8, w<bits>a16 or float");
  c.weight_bits = std::stoi(m[1].str());
  if (m[3].matched) c.activation_bits = std::stoi(m[3].str());
  return c;
}

QConfigPtr candidate_qconfig(const QConfig& base, const PrecisionCandidate& c, int64_t block_size, bool linear) {
  if (c.is_float()) return nullptr;
  auto q = std::make_shared<QConfig>(base);
  q->weight.bits = c.weight_bits;
  if (c.weight_bits < 8 && linear && block_size > 0) {
    q->weight.per_channel = true;
    q->weight.block_size = block_size;
  } else if (q->weight.block_size) {
    q->weight.per_channel = true;  // 8 bits, or a convolution: one scale per output channel
    q->weight.block_size.reset();
  }
  if (c.activation_bits == 16) {
    q->activation.dtype = QDType::kInt16;
    q->activation.bits.reset();
  }
  return q;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double noise_of(double db) { return db == kInf ? 0.0 : std::pow(10.0, -db / 10.0); }
double db_of(double noise) { return noise <= 0 ? kInf : -10.0 * std::log10(noise); }

std::vector<PrecisionCandidate> parse_candidates(const MixedPrecisionOptions& o) {
  if (o.candidates.size() < 2) throw ArgumentError("mixed_precision: at least two candidates are needed");
  std::vector<PrecisionCandidate> out;
  for (const auto& n : o.candidates) {
    for (const auto& c : out)
      if (c.name == n) throw ConfigError("ptq.mixed_precision.candidates: '" + n + "' is listed twice");
    out.push_back(PrecisionCandidate::parse(n, "ptq.mixed_precision.candidates"));
  }
  return out;
}

// The greedy walk over per-layer positions (index into SearchedLayer::candidates).
class Walk {
 public:
  Walk(std::vector<detail::SearchedLayer>& layers, const std::vector<PrecisionCandidate>& cands, double n_top,
       double bytes_budget, double latency_budget, double latency_unit)
      : L_(layers), C_(cands), n_top_(n_top), bb_(bytes_budget), lb_(latency_budget), unit_(latency_unit),
        pos_(layers.size(), 0) {}

  bool within() const { return (bb_ <= 0 || bytes() <= bb_) && (lb_ <= 0 || latency() <= lb_); }
  double bytes() const { return sum([&](size_t i, int c) { return static_cast<double>(L_[i].info.bytes.at(C_[c].name)); }); }
  double latency() const { return sum([&](size_t i, int c) { return L_[i].latency[c]; }); }
  double noise() const { return n_top_ + sum([&](size_t i, int c) { return L_[i].noise[c]; }); }
  MixedPrecisionPoint point() const {
    return {static_cast<int64_t>(bytes()), latency() / unit_, db_of(noise())};
  }
  const std::vector<size_t>& positions() const { return pos_; }
  void set_positions(std::vector<size_t> p) { pos_ = std::move(p); }

  // One step cheaper: the move with the least noise added per normalized cost saved
  // (the budgets still exceeded count; once all are met, every budget given). False at the end.
  bool step_down() {
    const bool over_b = bb_ > 0 && bytes() > bb_, over_l = lb_ > 0 && latency() > lb_;
    const bool all = !over_b && !over_l;
    double best = kInf;
    size_t bi = 0, bk = 0;
    for (size_t i = 0; i < L_.size(); ++i)
      for (size_t k = pos_[i] + 1; k < L_[i].candidates.size(); ++k) {
        const double gain = saved(i, pos_[i], k, all || over_b, all || over_l);
        if (gain <= 0) continue;
        const double r = (noise_at(i, k) - noise_at(i, pos_[i])) / gain;
        if (r < best) best = r, bi = i, bk = k;
      }
    if (best == kInf) return false;
    pos_[bi] = bk;
    return true;
  }

  // One step more precise within the budgets: the most noise removed per normalized cost added.
  bool step_up() {
    double best = 0;
    size_t bi = 0, bk = 0;
    for (size_t i = 0; i < L_.size(); ++i)
      for (size_t k = 0; k < pos_[i]; ++k) {
        const double removed = noise_at(i, pos_[i]) - noise_at(i, k);
        if (removed <= 0) continue;
        const size_t was = pos_[i];
        pos_[i] = k;
        const bool ok = within();
        pos_[i] = was;
        if (!ok) continue;
        const double r = removed / std::max(-saved(i, was, k, true, true), 1e-12);
        if (r > best) best = r, bi = i, bk = k;
      }
    if (best == 0) return false;
    pos_[bi] = bk;
    return true;
  }

 private:
  template <class F>
  double sum(F f) const {
    double s = 0;
    for (size_t i = 0; i < L_.size(); ++i) s += f(i, L_[i].candidates[pos_[i]]);
    return s;
  }
  double noise_at(size_t i, size_t k) const { return L_[i].noise[L_[i].candidates[k]]; }
  // Normalized cost saved by moving layer i from position a to b (negative: added).
  double saved(size_t i, size_t a, size_t b, bool count_bytes, bool count_latency) const {
    const auto& l = L_[i];
    const int ca = l.candidates[a], cb = l.candidates[b];
    double g = 0;
    if (bb_ > 0 && count_bytes)
      g += static_cast<double>(l.info.bytes.at(C_[ca].name) - l.info.bytes.at(C_[cb].name)) / bb_;
    if (lb_ > 0 && count_latency) g += (l.latency[ca] - l.latency[cb]) / lb_;
    return g;
  }

  std::vector<detail::SearchedLayer>& L_;
  const std::vector<PrecisionCandidate>& C_;
  double n_top_, bb_, lb_, unit_;
  std::vector<size_t> pos_;
};

// One LayerPrecision per searched layer; every layer is put back as found on destruction.
class Assignment {
 public:
  Assignment(std::vector<detail::SearchedLayer>& layers, const BackendConfig& backend, const MixedPrecisionOptions& o) {
    for (auto& l : layers) setters_.push_back(std::make_unique<detail::LayerPrecision>(l, backend, o));
  }
  detail::LayerPrecision& operator[](size_t i) { return *setters_[i]; }

 private:
  std::vector<std::unique_ptr<detail::LayerPrecision>> setters_;
};

struct Measure {
  fx::GraphModule& gm;
  std::vector<std::vector<at::Tensor>> samples;
  at::Tensor ref;
  double operator()() const { return detail::sqnr_db(ref, detail::run_all_flat(gm, samples, "mixed_precision")); }
};

Measure float_reference(fx::GraphModule& gm, const NextBatch& data, int64_t n) {
  Measure m{gm, detail::take_samples(data, n), {}};
  if (m.samples.empty()) throw ArgumentError("mixed_precision: no calibration samples to measure sensitivities on");
  set_quant_state(gm, QuantState::kFloat);
  m.ref = detail::run_all_flat(gm, m.samples, "mixed_precision");
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  return m;
}

// Per layer and candidate: the output SQNR with only that layer there (the others at their
// most precise), and the noise it adds; returns the SQNR with every layer at its most precise.
double sensitivities(std::vector<detail::SearchedLayer>& L, const std::vector<PrecisionCandidate>& C, Assignment& a,
                     const Measure& measure, const MixedPrecisionOptions& o) {
  for (size_t i = 0; i < L.size(); ++i) a[i].set(C[L[i].candidates[0]]);
  const double top_db = measure();
  const double n_top = noise_of(top_db);
  for (size_t i = 0; i < L.size(); ++i) {
    auto& l = L[i];
    l.noise.assign(C.size(), 0.0);
    l.info.sqnr_db[C[l.candidates[0]].name] = top_db;
    for (size_t k = 1; k < l.candidates.size(); ++k) {
      const PrecisionCandidate& c = C[l.candidates[k]];
      a[i].set(c);
      const double db = measure();
      l.info.sqnr_db[c.name] = db;
      l.noise[l.candidates[k]] = std::max(0.0, noise_of(db) - n_top);
    }
    a[i].set(C[l.candidates[0]]);
    if (o.progress) o.progress("sensitivities", static_cast<int64_t>(i) + 1, static_cast<int64_t>(L.size()));
  }
  return top_db;
}

// The output SQNR with layer i at candidate pick(i) for every layer.
template <class F>
double measure_with(std::vector<detail::SearchedLayer>& L, const std::vector<PrecisionCandidate>& C, Assignment& a,
                    const Measure& measure, F pick) {
  for (size_t i = 0; i < L.size(); ++i) a[i].set(C[pick(i)]);
  return measure();
}

// Every layer at candidate c (its most precise where it cannot take c): measured into r.uniform;
// returns each one's per-layer positions (indices into SearchedLayer::candidates).
std::vector<std::vector<size_t>> uniform_points(std::vector<detail::SearchedLayer>& L, const std::vector<PrecisionCandidate>& C,
                                                Assignment& a, const Measure& measure, MixedPrecisionResult& r) {
  std::vector<std::vector<size_t>> positions;
  for (size_t c = 0; c < C.size(); ++c) {
    std::vector<size_t> pos;
    int64_t bytes = 0;
    for (size_t i = 0; i < L.size(); ++i) {
      const auto& cs = L[i].candidates;
      const size_t k = std::find(cs.begin(), cs.end(), static_cast<int>(c)) - cs.begin();
      pos.push_back(k < cs.size() ? k : 0);
      bytes += L[i].info.bytes.at(C[cs[pos.back()]].name);
    }
    r.uniform[C[c].name] = {measure_with(L, C, a, measure, [&](size_t i) { return L[i].candidates[pos[i]]; }), bytes};
    positions.push_back(std::move(pos));
  }
  return positions;
}

void check_budget(const MixedPrecisionOptions& o) {
  if (o.weight_bytes <= 0 && o.effective_bits <= 0 && o.latency <= 0)
    throw ArgumentError("mixed_precision: no budget: set budget.weight_bytes, budget.effective_bits or budget.latency");
}

}  // namespace

MixedPrecisionResult mixed_precision(fx::GraphModule& gm, const QConfigMapping& mapping, const BackendConfig& backend,
                                     const NextBatch& data, const MixedPrecisionOptions& o) {
  at::NoGradGuard ng;
  check_budget(o);
  const std::vector<PrecisionCandidate> C = parse_candidates(o);
  MixedPrecisionResult r;
  std::vector<detail::SearchedLayer> L = detail::searched_layers(gm, mapping, r.notes);
  if (L.empty()) throw ArgumentError("mixed_precision: the model has no layer with a quantized weight to search");
  const Measure measure = float_reference(gm, data, o.num_samples);
  detail::count_macs(gm, L, measure.samples.front());
  const auto w8 = o.mac_cost.find("w8a8");
  const double w8_cost = w8 == o.mac_cost.end() ? 1.0 : w8->second;
  int64_t weights = 0;
  double unit = 0;  // the latency of every layer in w8a8
  for (auto& l : L) {
    detail::cost_candidates(l, C, backend, o, r.notes);
    if (l.candidates.empty()) throw ArgumentError("mixed_precision: layer " + l.info.layer + " can take none of the candidates");
    weights += l.info.weights;
    unit += static_cast<double>(l.info.macs) * w8_cost;
  }
  double bytes_budget = o.weight_bytes > 0 ? static_cast<double>(o.weight_bytes) : 0;
  if (o.effective_bits > 0) {
    const double b = o.effective_bits * static_cast<double>(weights) / 8.0;
    bytes_budget = bytes_budget > 0 ? std::min(bytes_budget, b) : b;
  }
  const double latency_budget = o.latency > 0 ? o.latency * unit : 0;

  Assignment a(L, backend, o);
  const double top_db = sensitivities(L, C, a, measure, o);
  Walk w(L, C, noise_of(top_db), bytes_budget, latency_budget, unit);
  r.front.push_back(w.point());
  std::vector<size_t> chosen;
  if (w.within()) chosen = w.positions();
  while (w.step_down()) {
    r.front.push_back(w.point());
    if (chosen.empty() && w.within()) chosen = w.positions();
  }
  r.reached = !chosen.empty();
  if (r.reached) {
    w.set_positions(chosen);
    while (w.step_up()) {
    }
  }  // else: where the walk ended (no move lowers the budgets exceeded)
  const std::vector<size_t> pos = w.positions();
  const auto uniform = uniform_points(L, C, a, measure, r);
  r.measured_sqnr_db = measure_with(L, C, a, measure, [&](size_t i) { return L[i].candidates[pos[i]]; });
  // Noise powers do not add exactly: an all-one-candidate assignment within the budgets that
  // measures better is taken instead.
  for (size_t c = 0; r.reached && c < C.size(); ++c) {
    Walk u = w;
    u.set_positions(uniform[c]);
    if (u.within() && r.uniform[C[c].name].first > r.measured_sqnr_db) {
      w.set_positions(uniform[c]);
      r.measured_sqnr_db = r.uniform[C[c].name].first;
      r.notes.push_back("every layer " + C[c].name + " measured better than the search's choice; taken instead");
    }
  }
  for (size_t i = 0; i < L.size(); ++i) L[i].info.chosen = C[L[i].candidates[w.positions()[i]]].name;
  const MixedPrecisionPoint p = w.point();
  r.weight_bytes = p.weight_bytes;
  r.latency = p.latency;
  r.estimated_sqnr_db = p.estimated_sqnr_db;
  r.weight_bytes_budget = static_cast<int64_t>(bytes_budget);
  r.latency_budget = o.latency;
  r.effective_bits = 8.0 * static_cast<double>(r.weight_bytes) / static_cast<double>(weights);
  for (auto& l : L) r.layers.push_back(std::move(l.info));
  return r;  // `a` puts every layer back as it was found
}

QConfigMapping with_mixed_precision(const QConfigMapping& mapping, const MixedPrecisionResult& r,
                                    const MixedPrecisionOptions& o) {
  QConfigMapping out = mapping;
  for (const auto& l : r.layers) {
    const QConfigPtr base = mapping.resolve(l.layer, l.object_type);
    if (!base) throw InternalError("mixed_precision: layer " + l.layer + " no longer resolves to a qconfig");
    out.set_module_name(l.layer, candidate_qconfig(*base, PrecisionCandidate::parse(l.chosen, "mixed_precision"),
                                                   o.block_size, l.linear));
  }
  return out;
}

}  // namespace qfx::quant
