// Per-layer SQNR: every quantized activation, fake-quant (Q/DQ simulated on the
// runtime) and int8 (the deployed kernels), against the lowered fp32 value.
#include <algorithm>

#include "metrics.h"
#include "stages.h"

namespace qfx::quant::pipeline {
namespace {

// Float values of a runtime tensor: as is, or int8/uint8/int16 codes dequantized.
at::Tensor dequantize(const runtime::Tensor& t, const Encoding& e) {
  if (t.dtype() == runtime::DType::kFloat32) return to_aten(t);
  const auto st = t.dtype() == runtime::DType::kUInt8   ? at::kByte
                  : t.dtype() == runtime::DType::kInt16 ? at::kShort
                                                        : at::kChar;
  at::Tensor q = at::from_blob(const_cast<void*>(t.raw()), t.shape(), st).to(at::kFloat);
  return (q - static_cast<float>(e.zero_point.at(0))) * e.scale.at(0);
}

// Error sums of one quantized tensor against its fp32 value.
struct LayerErr {
  double signal = 0, noise_fq = 0, noise_int8 = 0;
  bool has_fq = false, has_int8 = false;
  std::string value;  // the quantized tensor in the int8 model
};

// Which values each model computes for the per-tensor encodings of layers.
struct Watches {
  std::map<std::string, const Encoding*> enc_of_q;  // quantized tensor -> encoding
  std::map<std::string, std::string> node_of_fp;    // fp32 tensor -> node
  std::vector<std::string> fp, fq, int8;
};

Watches watches(const LoweredModel& fp32, const runtime::Model& fq, const Int8Model& int8) {
  Watches w;
  const auto fq_names = fq.value_names(), int8_names = int8.model.value_names();
  auto has = [](const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); };
  for (const auto& e : int8.exported.encodings) {
    const std::string* t = fp32.tensor_of(e.node);
    // Per-channel encodings, and constants quantized as activations (a position
    // embedding), are not layers.
    if (!t || e.axis >= 0 || fp32.model().constant(*t)) continue;
    w.enc_of_q[e.quantized] = &e;
    w.node_of_fp[*t] = e.node;
    w.fp.push_back(*t);
    if (has(fq_names, e.quantized)) w.fq.push_back(e.quantized);
    if (has(int8_names, e.quantized)) w.int8.push_back(e.quantized);
  }
  std::sort(w.fp.begin(), w.fp.end());
  w.fp.erase(std::unique(w.fp.begin(), w.fp.end()), w.fp.end());
  return w;
}

void to_rows(const std::map<std::string, LayerErr>& layers, PtqEvaluation* E) {
  E->layers.clear();
  for (const auto& [node, l] : layers)
    if (l.has_fq) E->layers.push_back({node, sqnr_db(l.signal, l.noise_fq), sqnr_db(l.signal, l.noise_int8), l.has_int8, l.value});
  std::sort(E->layers.begin(), E->layers.end(), [](const LayerSqnr& a, const LayerSqnr& b) {
    return (a.has_int8 ? a.sqnr_db_int8 : a.sqnr_db_fakequant) < (b.has_int8 ? b.sqnr_db_int8 : b.sqnr_db_fakequant);
  });
}

}  // namespace

void layer_sqnr_stage(const Job& job, const LoweredModel& fp32, const Int8Model& int8, Dataset& ev, PtqEvaluation* E) {
  const int64_t ns = std::min(job.cfg.evaluation.sqnr_samples, ev.size());
  if (ns <= 0) return;
  const auto fq = runtime::Model::load(int8.parsed, {job.runtime(), /*fuse_qdq=*/false});
  const Watches w = watches(fp32, fq, int8);
  std::map<std::string, LayerErr> layers;  // by node
  std::map<std::string, at::Tensor> ref;   // node -> fp32 value of the batch in flight
  auto accumulate = [&](bool is_int8) {
    return [&, is_int8](const std::string& name, const runtime::Tensor& t) {
      const Encoding& e = *w.enc_of_q.at(name);
      auto r = ref.find(e.node);
      if (r == ref.end()) return;
      LayerErr& l = layers[e.node];
      l.value = name;
      (is_int8 ? l.noise_int8 : l.noise_fq) += (dequantize(t, e) - r->second).pow(2).sum().item<double>();
      (is_int8 ? l.has_int8 : l.has_fq) = true;
    };
  };
  const int64_t sbs = std::min<int64_t>(job.cfg.calibration.batch_size, 8);  // small batches: every layer's fp32 value is held
  for (int64_t i = 0; i < ns; i += sbs) {
    const std::map<std::string, runtime::Tensor> in = feed(fp32.model(), ev.batch_inputs(i, std::min(i + sbs, ns)));
    fp32.model().run(in, w.fp, [&](const std::string& name, const runtime::Tensor& t) {
      const std::string& node = w.node_of_fp.at(name);
      ref[node] = to_aten(t);
      layers[node].signal += ref[node].pow(2).sum().item<double>();
    }, runtime::Model::WatchLayout::kPlain);
    fq.run(in, w.fq, accumulate(false));
    int8.model.run(in, w.int8, accumulate(true));
  }
  to_rows(layers, E);
  E->sqnr_images = ns;
}

}  // namespace qfx::quant::pipeline
