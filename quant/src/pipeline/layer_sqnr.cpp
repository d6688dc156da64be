// Per-layer SQNR: every quantized activation, fake-quant (Q/DQ simulated on the
// runtime) and int8 (the deployed kernels), against the lowered fp32 value; and the
// fake-quant error split into the layer's own part (teacher forcing: every quantized
// value before it replaced by its quantized fp32 value) and the part it inherits.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "metrics.h"
#include "stages.h"

namespace qfx::quant::pipeline {
namespace {

// The libtorch type and range of a runtime tensor's integer codes (uint8, int16, else int8).
struct Codes {
  at::ScalarType type;
  double lo, hi;
};
Codes codes_of(runtime::DType d) {
  if (d == runtime::DType::kUInt8) return {at::kByte, 0, 255};
  if (d == runtime::DType::kInt16) return {at::kShort, -32768, 32767};
  return {at::kChar, -128, 127};
}

// Float values of a runtime tensor: as is, or int8/uint8/int16 codes dequantized.
at::Tensor dequantize(const runtime::Tensor& t, const Encoding& e) {
  if (t.dtype() == runtime::DType::kFloat32) return to_aten(t);
  at::Tensor q = at::from_blob(const_cast<void*>(t.raw()), t.shape(), codes_of(t.dtype()).type).to(at::kFloat);
  return (q - static_cast<float>(e.zero_point.at(0))) * e.scale.at(0);
}

// Error sums of one quantized tensor against its fp32 value.
struct LayerErr {
  double signal = 0, noise_fq = 0, noise_int8 = 0, noise_own = 0, noise_inherited = 0;
  bool has_fq = false, has_int8 = false, has_own = false;
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
    if (l.has_fq) {
      LayerSqnr row;
      row.node = node;
      row.sqnr_db_fakequant = sqnr_db(l.signal, l.noise_fq);
      row.sqnr_db_int8 = sqnr_db(l.signal, l.noise_int8);
      row.has_int8 = l.has_int8;
      row.value = l.value;
      row.sqnr_db_own = sqnr_db(l.signal, l.noise_own);
      row.sqnr_db_inherited = l.noise_inherited > 0 ? sqnr_db(l.signal, l.noise_inherited) : HUGE_VAL;  // none inherited
      row.has_own = l.has_own;
      E->layers.push_back(row);
    }
  std::sort(E->layers.begin(), E->layers.end(), [](const LayerSqnr& a, const LayerSqnr& b) {
    return (a.has_int8 ? a.sqnr_db_int8 : a.sqnr_db_fakequant) < (b.has_int8 ? b.sqnr_db_int8 : b.sqnr_db_fakequant);
  });
}

// Squared distance of two float tensors.
double sq_dist(const at::Tensor& a, const at::Tensor& b) { return (a - b).pow(2).sum().item<double>(); }

// The fp32 value `ref` quantized as QuantizeLinear does (round half to even, the
// zero point added, saturated to the codes' type), into the codes tensor `codes`.
void quantize_into(const at::Tensor& ref, const Encoding& e, runtime::Tensor& codes) {
  const Codes c = codes_of(codes.dtype());
  const at::Tensor q = (ref / e.scale.at(0)).round().add(e.zero_point.at(0)).clamp(c.lo, c.hi).to(c.type).contiguous();
  std::memcpy(codes.raw(), q.data_ptr(), codes.nbytes());
}

// Teacher forcing on the fake-quant model: every quantized value (QuantizeLinear's
// codes) is handed over as computed, kept dequantized as that layer's own result,
// and replaced by the codes of its fp32 value, so each layer computes from the
// quantized fp32 values of its inputs. Empty when the model keeps those values on a
// device (nothing is replaced there).
std::map<std::string, at::Tensor> own_values(const runtime::Model& fq, const Watches& w,
                                             const std::map<std::string, runtime::Tensor>& in,
                                             const std::map<std::string, at::Tensor>& ref) {
  std::map<std::string, at::Tensor> own;
  auto replace = [&](const std::string& name, runtime::Tensor& codes) {
    const Encoding& e = *w.enc_of_q.at(name);
    auto r = ref.find(e.node);
    if (r == ref.end() || codes.dtype() == runtime::DType::kFloat32 || codes.numel() != r->second.numel()) return;
    own[e.node] = dequantize(codes, e);
    quantize_into(r->second, e, codes);
  };
  try {
    fq.run_replacing(in, w.fq, replace, {}, [](const std::string&, const runtime::Tensor&) {});
  } catch (const DataError&) {
    own.clear();
  }
  return own;
}

}  // namespace

void layer_sqnr_stage(const Job& job, const LoweredModel& fp32, const Int8Model& int8, Dataset& ev, PtqEvaluation* E) {
  const int64_t ns = std::min(job.cfg.evaluation.sqnr_samples, ev.size());
  if (ns <= 0) return;
  const auto fq = runtime::Model::load(int8.parsed, {job.runtime(), /*fuse_qdq=*/false});
  const Watches w = watches(fp32, fq, int8);
  std::map<std::string, LayerErr> layers;  // by node
  std::map<std::string, at::Tensor> ref;   // node -> fp32 value of the batch in flight
  std::map<std::string, at::Tensor> own;   // node -> the layer-alone fake-quant value of the batch in flight
  bool split = true;
  auto accumulate = [&](bool is_int8) {
    return [&, is_int8](const std::string& name, const runtime::Tensor& t) {
      const Encoding& e = *w.enc_of_q.at(name);
      auto r = ref.find(e.node);
      if (r == ref.end()) return;
      LayerErr& l = layers[e.node];
      l.value = name;
      const at::Tensor v = dequantize(t, e);
      (is_int8 ? l.noise_int8 : l.noise_fq) += sq_dist(v, r->second);
      (is_int8 ? l.has_int8 : l.has_fq) = true;
      auto o = own.find(e.node);
      if (is_int8 || o == own.end()) return;
      l.noise_own += sq_dist(o->second, r->second);
      l.noise_inherited += sq_dist(v, o->second);
      l.has_own = true;
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
    if (split) split = !(own = own_values(fq, w, in, ref)).empty();  // a device-resident model: no split, not tried again
    fq.run(in, w.fq, accumulate(false), runtime::Model::WatchLayout::kPlain);
    int8.model.run(in, w.int8, accumulate(true));
  }
  to_rows(layers, E);
  E->sqnr_images = ns;
}

}  // namespace qfx::quant::pipeline
