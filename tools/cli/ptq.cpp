// qfx ptq: trace, prepare, calibrate on the runtime, convert to int8 ONNX,
// evaluate fp32 against int8 on the runtime, per-layer SQNR, report.
#include "ptq.h"

#include "common.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "qfx/error.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/calibrate.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/ptq_config.h"
#include "qfx/runtime/model.h"

namespace qfx::cli {
namespace {

// Float values of a runtime tensor: as is, or int8/uint8 codes dequantized.
at::Tensor dequantize(const runtime::Tensor& t, const quant::Encoding& e) {
  if (t.dtype() == runtime::DType::kFloat32) return to_aten(t);
  const auto st = t.dtype() == runtime::DType::kUInt8 ? at::kByte : at::kChar;
  at::Tensor q = at::from_blob(const_cast<void*>(t.raw()), t.shape(), st).to(at::kFloat);
  return (q - static_cast<float>(e.zero_point.at(0))) * e.scale.at(0);
}

double sqnr_db(double signal, double noise) { return 10.0 * std::log10(signal / std::max(noise, 1e-30)); }
double cosine(const at::Tensor& a, const at::Tensor& b) {
  return (a * b).sum().item<double>() / (a.norm().item<double>() * b.norm().item<double>() + 1e-30);
}
double sqnr(const at::Tensor& ref, const at::Tensor& x) {
  return sqnr_db(ref.pow(2).sum().item<double>(), (ref - x).pow(2).sum().item<double>());
}

// Per-layer error sums of one quantized tensor against its fp32 value.
struct LayerErr {
  double signal = 0, noise_fq = 0, noise_int8 = 0;
  bool has_fq = false, has_int8 = false;
};

}  // namespace

int run_ptq(const std::string& config_path, const std::vector<std::string>& overrides) {
  const auto t_start = Clock::now();
  quant::PtqConfig cfg = quant::load_ptq_config(config_path, overrides);
  if (cfg.calibration.images.empty()) throw ConfigError(config_path + ": 'calibration' is required for qfx ptq");
  auto backend = quant::BackendConfig::resolve(cfg.backend);
  const std::string rt_backend = backend.name == "reference" ? "reference" : "onednn";
  if (!fs::exists(cfg.model)) throw IoError(cfg.model + ": model file not found (model.path in " + config_path + ")");
  std::printf("qfx ptq: %s on backend '%s' (config %s)\n", cfg.model.c_str(), backend.name.c_str(), config_path.c_str());

  auto cal = quant::open_dataset(cfg.calibration, cfg.input_shape, cfg.calibration_samples, cfg.seed);
  const bool have_eval = !cfg.evaluation.images.empty();
  std::unique_ptr<quant::Dataset> ev;
  if (have_eval) ev = quant::open_dataset(cfg.evaluation, cfg.input_shape, cfg.evaluation_samples, -1);
  Staging out(cfg.output_dir);

  auto gm = fx::trace_file(cfg.model, cfg.tracer.options);
  gm->eval();
  at::NoGradGuard ng;
  const int64_t bs = cfg.batch_size;
  auto for_batches = [&](quant::Dataset& d, int64_t n, const std::function<void(const at::Tensor&, int64_t)>& fn) {
    for (int64_t i = 0; i < n; i += bs) fn(d.batch(i, std::min(i + bs, n)), i);
  };
  quant::prepare_fx(*gm, cfg.qconfig, backend);

  // The float model as the runtime runs it (batch norm folded, observers as pass-throughs).
  quant::ConvertOptions fo;
  fo.float_model = true;
  fo.input_shapes = {cfg.input_shape};
  fo.input_names = {"input"};
  quant::ConvertResult fr;
  const std::string float_onnx = quant::export_onnx(*gm, fo, &fr);
  std::map<std::string, std::string> fp32_tensor_of;  // fx node -> fp32 ONNX value
  std::vector<std::string> keep;
  for (const auto& o : fr.observed) {
    fp32_tensor_of[o.node] = o.tensor;
    keep.push_back(o.tensor);
  }
  // Two loads of the float graph: as deployed (fused, channels last) for evaluation and
  // latency, and with the observed values kept for the per-layer SQNR table.
  auto fp32 = runtime::Model::load_from_string(float_onnx, {rt_backend, false}, cfg.model + " (float graph)");
  runtime::ModelOptions fmo(rt_backend, false);
  fmo.keep_values = keep;
  auto fp32_watch = runtime::Model::load_from_string(float_onnx, fmo, cfg.model + " (float graph)");

  // Calibrate on the runtime.
  Progress pc("calibration", cal->size());
  quant::CalibrateOptions co;
  co.backend = rt_backend;
  co.input_shapes = {cfg.input_shape};
  co.progress = [&](int64_t n) { pc.update(n); };
  auto cr = quant::calibrate(*gm, quant::batches(*cal, bs), co);
  const double cal_rate = static_cast<double>(cr.images) / std::max(cr.seconds, 1e-9);
  quant::set_quant_state(*gm, quant::QuantState::kFakeQuant);
  quant::disable_observer(*gm);

  // Convert.
  const std::string onnx_path = out.path("model_int8.onnx");
  quant::ConvertResult conv = convert_model(*gm, onnx_path, cfg.input_shape);
  auto int8 = runtime::Model::load(onnx_path, {rt_backend});

  nlohmann::json report;
  report["model"] = cfg.model;
  report["config"] = config_path;
  report["backend"] = backend.name;
  report["runtime_backend"] = rt_backend;
  report["calibration"] = {{"images", cr.images}, {"images_per_s", cal_rate}, {"engine", cr.engine},
                           {"seconds", cr.seconds}, {"observed_tensors", cr.observed_tensors}};
  if (!cr.fallback_reason.empty()) report["calibration"]["fallback_reason"] = cr.fallback_reason;
  report["float_fallbacks"] = quant::float_fallbacks(*gm);
  report["runtime_float_groups"] = int8.float_fallbacks();
  report["export_float_ops"] = conv.float_ops;
  std::printf("calibration: %lld images on %s, %.1f images/s\n", static_cast<long long>(cr.images), cr.engine.c_str(), cal_rate);
  if (!cr.fallback_reason.empty()) std::printf("  (libtorch fallback: %s)\n", cr.fallback_reason.c_str());

  if (have_eval) {
    const int64_t n = ev->size();
    std::vector<at::Tensor> fp_outs, q_outs;
    Progress pe("evaluation (fp32 + int8)", n);
    // Latency leaves out the first batch, which also builds the plans (kernels, packed weights).
    double t_fp32 = 0, t_int8 = 0, libtorch_rel = 0;
    int64_t timed = 0;
    for_batches(*ev, n, [&](const at::Tensor& b, int64_t i) {
      std::map<std::string, runtime::Tensor> in{{"input", wrap(b)}};
      const bool time_it = i > 0 || n <= bs;
      auto t0 = Clock::now();
      at::Tensor f = to_aten(fp32.run(in).at("output"));
      if (time_it) t_fp32 += secs(t0);
      t0 = Clock::now();
      at::Tensor q = to_aten(int8.run(in).at("output"));
      if (time_it) {
        t_int8 += secs(t0);
        timed += b.size(0);
      }
      if (i == 0) {  // independent check: the runtime's fp32 against libtorch on the first batch
        quant::set_quant_state(*gm, quant::QuantState::kFloat);
        at::Tensor ref = gm->forward(b);
        quant::set_quant_state(*gm, quant::QuantState::kFakeQuant);
        libtorch_rel = ((f - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item<double>();
      }
      fp_outs.push_back(f);
      q_outs.push_back(q);
      pe.update(i + b.size(0));
    });
    at::Tensor fp = at::cat(fp_outs), q = at::cat(q_outs);
    report["evaluation"] = {{"images", n},
                            {"fp32_runtime_vs_libtorch_max_rel_error", libtorch_rel},
                            {"cosine_int8_vs_fp32", cosine(q, fp)},
                            {"sqnr_db_int8_vs_fp32", sqnr(fp, q)},
                            {"fp32_ms_per_image", 1000.0 * t_fp32 / static_cast<double>(timed)},
                            {"int8_ms_per_image", 1000.0 * t_int8 / static_cast<double>(timed)}};
    std::printf("fp32 on the runtime vs libtorch (first batch): max relative error %.2e\n", libtorch_rel);
    std::printf("latency on the runtime (batch %lld): fp32 %.3f ms/image, int8 %.3f ms/image (int8/fp32 %.2f)\n",
                static_cast<long long>(bs), 1000.0 * t_fp32 / static_cast<double>(timed), 1000.0 * t_int8 / static_cast<double>(timed),
                t_int8 / std::max(t_fp32, 1e-12));
    std::printf("output: cosine int8 vs fp32 %.5f, SQNR %.1f dB\n", cosine(q, fp), sqnr(fp, q));
    if (ev->labels().defined()) {
      const at::Tensor& y = ev->labels();
      const double top1_fp32 = fp.argmax(1).eq(y).to(at::kDouble).mean().item<double>();
      const double top1_int8 = q.argmax(1).eq(y).to(at::kDouble).mean().item<double>();
      const double agree = q.argmax(1).eq(fp.argmax(1)).to(at::kDouble).mean().item<double>();
      report["evaluation"]["top1_fp32"] = top1_fp32;
      report["evaluation"]["top1_int8"] = top1_int8;
      report["evaluation"]["prediction_agreement"] = agree;
      std::printf("top-1: fp32 %.2f%%, int8 %.2f%% (%+.2f points); int8 and fp32 agree on %.2f%% of %lld images\n",
                  100 * top1_fp32, 100 * top1_int8, 100 * (top1_int8 - top1_fp32), 100 * agree, static_cast<long long>(n));
    }

    // Per-layer SQNR: every quantized activation, fake-quant (Q/DQ simulated on the
    // runtime) and int8 (the deployed kernels), against the fp32 value.
    const int64_t ns = std::min(cfg.sqnr_samples, n);
    if (ns > 0) {
      auto fq = runtime::Model::load(onnx_path, {rt_backend, /*fuse_qdq=*/false});
      std::map<std::string, const quant::Encoding*> enc_of_q;  // quantized tensor -> encoding
      std::vector<std::string> w_fp, w_fq, w_int8;
      const auto fq_names = fq.value_names(), int8_names = int8.value_names();
      auto has = [](const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); };
      std::map<std::string, std::string> node_of_fp;  // fp32 tensor -> node
      for (const auto& e : conv.encodings) {
        auto it = fp32_tensor_of.find(e.node);
        if (it == fp32_tensor_of.end() || e.axis >= 0) continue;
        enc_of_q[e.quantized] = &e;
        node_of_fp[it->second] = e.node;
        w_fp.push_back(it->second);
        if (has(fq_names, e.quantized)) w_fq.push_back(e.quantized);
        if (has(int8_names, e.quantized)) w_int8.push_back(e.quantized);
      }
      std::sort(w_fp.begin(), w_fp.end());
      w_fp.erase(std::unique(w_fp.begin(), w_fp.end()), w_fp.end());
      std::map<std::string, LayerErr> layers;  // by node
      std::map<std::string, at::Tensor> ref;   // node -> fp32 value of the batch in flight
      const int64_t sbs = std::min<int64_t>(bs, 8);  // small batches: the fp32 values of every layer are held
      for (int64_t i = 0; i < ns; i += sbs) {
        at::Tensor b = ev->batch(i, std::min(i + sbs, ns));
        std::map<std::string, runtime::Tensor> in{{"input", wrap(b)}};
        fp32_watch.run(in, w_fp, [&](const std::string& name, const runtime::Tensor& t) {
          const std::string& node = node_of_fp.at(name);
          ref[node] = to_aten(t);
          layers[node].signal += ref[node].pow(2).sum().item<double>();
        });
        auto accumulate = [&](bool is_int8) {
          return [&, is_int8](const std::string& name, const runtime::Tensor& t) {
            const quant::Encoding& e = *enc_of_q.at(name);
            auto r = ref.find(e.node);
            if (r == ref.end()) return;
            const double err = (dequantize(t, e) - r->second).pow(2).sum().item<double>();
            LayerErr& l = layers[e.node];
            (is_int8 ? l.noise_int8 : l.noise_fq) += err;
            (is_int8 ? l.has_int8 : l.has_fq) = true;
          };
        };
        fq.run(in, w_fq, accumulate(false));
        int8.run(in, w_int8, accumulate(true));
      }
      struct Row {
        std::string node;
        double fq, q;
        bool has_q;
      };
      std::vector<Row> rows;
      for (const auto& kv : layers)
        if (kv.second.has_fq)
          rows.push_back({kv.first, sqnr_db(kv.second.signal, kv.second.noise_fq), sqnr_db(kv.second.signal, kv.second.noise_int8),
                          kv.second.has_int8});
      std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return (a.has_q ? a.q : a.fq) < (b.has_q ? b.q : b.fq); });
      nlohmann::json jl = nlohmann::json::array();
      for (const auto& r : rows) {
        nlohmann::json j = {{"node", r.node}, {"sqnr_db_fakequant", r.fq}};
        if (r.has_q) j["sqnr_db_int8"] = r.q;
        jl.push_back(j);
      }
      report["per_layer_sqnr"] = {{"images", ns}, {"layers", jl}};
      std::printf("per-layer SQNR vs fp32 on %lld images, worst first (%zu layers; all in report.json):\n",
                  static_cast<long long>(ns), rows.size());
      std::printf("  %-40s %12s %12s\n", "quantized tensor (node)", "fake-quant", "int8");
      for (size_t k = 0; k < std::min<size_t>(rows.size(), 10); ++k) {
        char q[32] = "    (float)";
        if (rows[k].has_q) std::snprintf(q, sizeof q, "%9.1f dB", rows[k].q);
        std::printf("  %-40s %9.1f dB %12s\n", rows[k].node.c_str(), rows[k].fq, q);
      }
    }

    // The reference backend must give the same int8 outputs, bit for bit.
    const int64_t nr = cfg.reference_check < 0 ? n : std::min(cfg.reference_check, n);
    if (nr > 0 && rt_backend != "reference") {
      auto ref_model = runtime::Model::load(onnx_path, {"reference"});
      int64_t identical = 0;
      double max_diff = 0;
      Progress pr("reference backend check", nr);
      for_batches(*ev, nr, [&](const at::Tensor& b, int64_t i) {
        at::Tensor r = to_aten(ref_model.run({{"input", wrap(b)}}).at("output"));
        at::Tensor o = q.slice(0, i, i + b.size(0));
        identical += (r == o).flatten(1).all(1).sum().item<int64_t>();
        max_diff = std::max(max_diff, (r - o).abs().max().item<double>());
        pr.update(i + b.size(0));
      });
      report["evaluation"]["reference_check"] = {{"images", nr}, {"identical_outputs", identical}, {"max_abs_diff", max_diff}};
      std::printf("reference backend: %lld of %lld int8 outputs identical to %s's (max |diff| %.3g)\n",
                  static_cast<long long>(identical), static_cast<long long>(nr), rt_backend.c_str(), max_diff);
    }
  }

  quant::write_encodings(out.path("encodings.json"), conv, quant::graph_hash(*gm), backend.name);
  report["outputs"] = {out.final_path("model_int8.onnx"), out.final_path("encodings.json"), out.final_path("report.json")};
  report["seconds"] = secs(t_start);
  write_json(out.path("report.json"), report);
  out.commit();
  const auto fb = quant::float_fallbacks(*gm);
  std::printf("float fallbacks: %s\n", fb.empty() && int8.float_fallbacks().empty() ? "none" : "");
  for (const auto& f : fb) std::printf("  %s\n", f.c_str());
  for (const auto& f : int8.float_fallbacks()) std::printf("  runtime: %s\n", f.c_str());
  std::printf("wrote model_int8.onnx, encodings.json, report.json in %s (%.1f s)\n", cfg.output_dir.c_str(), secs(t_start));
  return 0;
}

}  // namespace qfx::cli
