// Runs qfx's GPTQ (quant::gptq_quantize) on one layer given as .npy files, for the
// independent NumPy implementation (tests/quant/gptq_reference.py) to compare:
//   gptq_check W.npy X.npy OUT_DIR BITS DTYPE QSCHEME BLOCK ACT_ORDER LAZY_BATCHES DAMP
// W float32 [C, K], X float32 [N, K]; DTYPE s8 | u8, QSCHEME symmetric | affine, BLOCK
// 0 for per-channel qparams, LAZY_BATCHES a comma-separated list. Writes, for each lazy
// batch L, OUT_DIR/codes_L.npy (int32 [C, K]), scale_L.npy (float32), zero_point_L.npy
// (int32) and errors_L.txt ("nearest gptq" relative errors).
#include <ATen/ATen.h>

#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>

#include "qfx/quant/block_quant.h"
#include "qfx/quant/ptq_algorithms.h"
#include "qfx/runtime/npy.h"

using namespace qfx;
using namespace qfx::quant;

namespace {

at::Tensor load_float(const std::string& path) {
  const runtime::Tensor t = runtime::load_npy(path);
  if (t.dtype() != runtime::DType::kFloat32) throw std::runtime_error(path + ": expected float32");
  return at::from_blob(const_cast<float*>(t.data<float>()), t.shape(), at::kFloat).clone();
}

template <typename T>
void save(const std::string& path, const at::Tensor& a, runtime::DType dtype) {
  const at::Tensor c = a.contiguous();
  runtime::Tensor t(c.sizes().vec(), dtype);
  std::memcpy(t.raw(), c.data_ptr<T>(), t.nbytes());
  runtime::save_npy(path, t);
}

// What the weight observer computes: min/max per channel or per block of the float32 weight.
QParams observed_qparams(const at::Tensor& w, const QuantSpec& spec) {
  const at::Tensor rows = spec.block_size > 0 ? to_blocks(w, spec.block_size) : w;
  const auto [mn, mx] = at::aminmax(rows, 1);
  return compute_qparams(mn, mx, spec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 11) {
    std::cerr << "usage: gptq_check W.npy X.npy OUT_DIR BITS DTYPE QSCHEME BLOCK ACT_ORDER LAZY_BATCHES DAMP\n";
    return 2;
  }
  try {
    const at::Tensor w = load_float(argv[1]), x = load_float(argv[2]);
    const std::string out = argv[3];
    QuantSpec spec = QuantSpec::make(parse_qdtype(argv[5]), std::string(argv[6]) == "affine" ? QScheme::kAffine : QScheme::kSymmetric,
                                     std::stoi(argv[4]));
    spec.per_channel = true;
    spec.ch_axis = 0;
    spec.block_size = std::stoll(argv[7]);
    GptqOptions o;
    o.act_order = std::string(argv[8]) == "1";
    o.damp = std::stod(argv[10]);
    GptqHessian h(w.size(1));
    for (int64_t i = 0; i < x.size(0); i += 100) h.add(x.slice(0, i, i + 100));  // in batches, as from a model
    const QParams observed = observed_qparams(w, spec);
    // Round to nearest on the observed qparams, for the errors.
    const at::Tensor s = observed.scale.to(at::kDouble), z = observed.zero_point.to(at::kDouble);
    const int64_t c = w.size(0), k = w.size(1);
    const at::Tensor se = spec.block_size > 0 ? expand_blocks(s, c, k, spec.block_size) : s.reshape({c, 1});
    const at::Tensor ze = spec.block_size > 0 ? expand_blocks(z, c, k, spec.block_size) : z.reshape({c, 1});
    const at::Tensor w64 = w.to(at::kDouble);
    const at::Tensor nearest = (at::clamp(at::round(w64 / se) + ze, spec.quant_min, spec.quant_max) - ze) * se;
    std::stringstream lazies(argv[9]);
    for (std::string lazy; std::getline(lazies, lazy, ',');) {
      o.lazy_batch = std::stoll(lazy);
      const GptqWeights g = gptq_quantize(w, h.hessian(), spec, observed, o);
      save<int32_t>(out + "/codes_" + lazy + ".npy", g.codes.to(at::kInt), runtime::DType::kInt32);
      save<float>(out + "/scale_" + lazy + ".npy", g.qparams.scale.to(at::kFloat), runtime::DType::kFloat32);
      save<int32_t>(out + "/zero_point_" + lazy + ".npy", g.qparams.zero_point.to(at::kInt), runtime::DType::kInt32);
      std::ofstream(out + "/errors_" + lazy + ".txt") << std::setprecision(17) << gptq_relative_error(w64, nearest, h.hessian())
                                                      << ' ' << gptq_relative_error(w64, g.weight, h.hessian()) << '\n';
    }
  } catch (const std::exception& e) {
    std::cerr << "gptq_check: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
