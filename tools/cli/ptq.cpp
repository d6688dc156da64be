// qfx ptq: trace, prepare, calibrate, convert to int8 ONNX, evaluate, report.
#include "ptq.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "qfx/error.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/data.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/ptq_config.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/npy.h"

namespace qfx::cli {
namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

// Progress on a terminal (one rewritten line), plain lines otherwise.
class Progress {
 public:
  Progress(std::string what, int64_t total) : what_(std::move(what)), total_(total), tty_(isatty(2)), t0_(Clock::now()) {}
  void update(int64_t done) {
    const double s = secs(t0_), rate = s > 0 ? static_cast<double>(done) / s : 0.0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
    if (tty_) {
      const int width = 30, fill = static_cast<int>(width * done / std::max<int64_t>(total_, 1));
      std::fprintf(stderr, "\r%s [%s%s] %lld/%lld  %.0f img/s  ETA %.0fs ", what_.c_str(), std::string(fill, '#').c_str(),
                   std::string(width - fill, '.').c_str(), static_cast<long long>(done), static_cast<long long>(total_), rate, eta);
      if (done >= total_) std::fprintf(stderr, "\n");
    } else if (done >= total_ || secs(last_) > 5.0) {
      std::fprintf(stderr, "%s: %lld/%lld images, %.0f img/s\n", what_.c_str(), static_cast<long long>(done),
                   static_cast<long long>(total_), rate);
      last_ = Clock::now();
    }
  }
  double rate(int64_t done) const { return static_cast<double>(done) / std::max(secs(t0_), 1e-9); }

 private:
  std::string what_;
  int64_t total_;
  bool tty_;
  Clock::time_point t0_, last_ = Clock::now();
};

struct Dataset {
  at::Tensor images;  // float [N, C, H, W]
  at::Tensor labels;  // int64 [N] or undefined
};

Dataset load_data(const quant::DataSpec& d, int64_t limit) {
  Dataset out;
  if (d.format == "idx") {
    out.images = quant::load_idx_images(d.images, limit, d.mean, d.std);
    if (!d.labels.empty()) out.labels = quant::load_idx_labels(d.labels, limit);
  } else {
    auto t = runtime::load_npy(d.images);
    if (t.dtype() != runtime::DType::kFloat32) throw DataError(d.images + ": expected float32 images");
    out.images = at::from_blob(t.raw(), t.shape(), at::kFloat).clone();
    if (limit > 0 && limit < out.images.size(0)) out.images = out.images.slice(0, 0, limit);
    if (!d.labels.empty()) {
      auto l = runtime::load_npy(d.labels);
      out.labels = at::from_blob(l.raw(), l.shape(), l.dtype() == runtime::DType::kInt64 ? at::kLong : at::kInt).to(at::kLong).clone();
      if (limit > 0 && limit < out.labels.size(0)) out.labels = out.labels.slice(0, 0, limit);
    }
  }
  if (out.labels.defined() && out.labels.size(0) != out.images.size(0))
    throw DataError(d.labels + ": " + std::to_string(out.labels.size(0)) + " labels for " +
                    std::to_string(out.images.size(0)) + " images");
  return out;
}

runtime::Tensor to_runtime(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  runtime::Tensor r(std::vector<int64_t>(c.sizes().begin(), c.sizes().end()), runtime::DType::kFloat32);
  std::memcpy(r.raw(), c.data_ptr(), r.nbytes());
  return r;
}

void write_json(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) throw IoError(path + ": cannot write");
    f << j.dump(2) << "\n";
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

int run_ptq(const std::string& config_path, const std::vector<std::string>& overrides) {
  const auto t_start = Clock::now();
  quant::PtqConfig cfg = quant::load_ptq_config(config_path, overrides);
  auto backend = quant::BackendConfig::resolve(cfg.backend);
  std::filesystem::create_directories(cfg.output_dir);
  std::printf("qfx ptq: %s on backend '%s' (config %s)\n", cfg.model.c_str(), backend.name.c_str(), config_path.c_str());

  Dataset cal = load_data(cfg.calibration, cfg.calibration_samples);
  Dataset ev;
  const bool have_eval = !cfg.evaluation.images.empty();
  if (have_eval) ev = load_data(cfg.evaluation, cfg.evaluation_samples);

  auto gm = fx::trace_file(cfg.model, cfg.tracer.options);
  gm->eval();
  at::NoGradGuard ng;
  const int64_t bs = cfg.batch_size;
  auto batches = [&](const at::Tensor& x, const std::function<void(const at::Tensor&, int64_t)>& fn) {
    for (int64_t i = 0; i < x.size(0); i += bs) fn(x.slice(0, i, std::min(i + bs, x.size(0))), i);
  };
  // fp32 reference outputs (libtorch, before any change to the graph).
  at::Tensor fp32_out;
  if (have_eval) {
    std::vector<at::Tensor> outs;
    Progress p("fp32 evaluation", ev.images.size(0));
    batches(ev.images, [&](const at::Tensor& b, int64_t i) {
      outs.push_back(gm->forward(b));
      p.update(i + b.size(0));
    });
    fp32_out = at::cat(outs);
  }
  // prepare + calibrate.
  quant::prepare_fx(*gm, cfg.qconfig, backend);
  Progress pc("calibration", cal.images.size(0));
  batches(cal.images, [&](const at::Tensor& b, int64_t i) {
    gm->forward(b);
    pc.update(i + b.size(0));
  });
  const double cal_rate = pc.rate(cal.images.size(0));
  quant::set_quant_state(*gm, quant::QuantState::kFakeQuant);
  quant::disable_observer(*gm);
  // convert.
  const std::string onnx_path = (std::filesystem::path(cfg.output_dir) / "model_int8.onnx").string();
  quant::ConvertOptions co;
  co.input_shapes = {cfg.input_shape};
  co.input_names = {"input"};
  quant::ConvertResult conv = quant::convert_fx(*gm, onnx_path, co);
  // int8 on the runtime.
  auto model = runtime::Model::load(onnx_path, {backend.name == "reference" ? "reference" : "onednn"});
  nlohmann::json report;
  report["model"] = cfg.model;
  report["backend"] = backend.name;
  report["calibration"] = {{"images", cal.images.size(0)}, {"images_per_s", cal_rate}};
  report["float_fallbacks"] = quant::float_fallbacks(*gm);
  report["runtime_float_groups"] = model.float_fallbacks();
  report["export_float_ops"] = conv.float_ops;
  std::printf("calibration: %lld images, %.1f images/s\n", static_cast<long long>(cal.images.size(0)), cal_rate);
  if (have_eval) {
    std::vector<at::Tensor> fq_outs, q_outs;
    Progress pe("int8 evaluation", ev.images.size(0));
    double t_int8 = 0;
    // Fake-quant (libtorch) outputs on the first 1,000 images only: enough for its SQNR.
    const int64_t n_fq = std::min<int64_t>(ev.images.size(0), 1000);
    batches(ev.images, [&](const at::Tensor& b, int64_t i) {
      if (i < n_fq) fq_outs.push_back(gm->forward(b));
      const auto t0 = Clock::now();
      auto out = model.run({{"input", to_runtime(b)}}).at("output");
      t_int8 += secs(t0);
      q_outs.push_back(at::from_blob(out.raw(), out.shape(), at::kFloat).clone());
      pe.update(i + b.size(0));
    });
    at::Tensor fq = at::cat(fq_outs), q = at::cat(q_outs);
    const at::Tensor fp32_fq = fp32_out.slice(0, 0, fq.size(0));
    auto cosine = [](const at::Tensor& a, const at::Tensor& b) {
      return (a * b).sum().item<double>() / (a.norm().item<double>() * b.norm().item<double>() + 1e-30);
    };
    auto sqnr = [](const at::Tensor& ref, const at::Tensor& x) {
      return 10.0 * std::log10(ref.pow(2).sum().item<double>() / std::max((ref - x).pow(2).sum().item<double>(), 1e-30));
    };
    report["evaluation"] = {{"images", ev.images.size(0)},
                            {"cosine_int8_vs_fp32", cosine(q, fp32_out)},
                            {"sqnr_db_int8_vs_fp32", sqnr(fp32_out, q)},
                            {"sqnr_db_fakequant_vs_fp32", sqnr(fp32_fq, fq)},
                            {"int8_runtime_ms_per_image", 1000.0 * t_int8 / static_cast<double>(ev.images.size(0))}};
    std::printf("output SQNR vs fp32: fake-quant %.1f dB (first %lld images), int8 runtime %.1f dB; cosine %.5f\n",
                sqnr(fp32_fq, fq), static_cast<long long>(fq.size(0)),
                sqnr(fp32_out, q), cosine(q, fp32_out));
    if (ev.labels.defined()) {
      const double top1_fp32 = fp32_out.argmax(1).eq(ev.labels).to(at::kDouble).mean().item<double>();
      const double top1_int8 = q.argmax(1).eq(ev.labels).to(at::kDouble).mean().item<double>();
      const double agree = q.argmax(1).eq(fp32_out.argmax(1)).to(at::kDouble).mean().item<double>();
      report["evaluation"]["top1_fp32"] = top1_fp32;
      report["evaluation"]["top1_int8"] = top1_int8;
      report["evaluation"]["prediction_agreement"] = agree;
      std::printf("top-1: fp32 %.2f%%, int8 %.2f%% (%+.2f points); int8 and fp32 agree on %.2f%% of %lld images\n",
                  100 * top1_fp32, 100 * top1_int8, 100 * (top1_int8 - top1_fp32), 100 * agree,
                  static_cast<long long>(ev.images.size(0)));
    }
  }
  // encodings.json: per tensor dtype, scale, zero point, axis, algorithm, observed range, graph hash.
  nlohmann::json enc;
  enc["graph_hash"] = quant::graph_hash(*gm);
  enc["backend"] = backend.name;
  for (const auto& e : conv.encodings)
    enc["activations"][e.tensor] = {{"node", e.node}, {"dtype", e.dtype}, {"scale", e.scale},
                                    {"zero_point", e.zero_point}, {"axis", e.axis}, {"quant_min", e.quant_min},
                                    {"quant_max", e.quant_max}, {"algorithm", e.algorithm},
                                    {"observed_min", e.observed_min}, {"observed_max", e.observed_max}};
  write_json((std::filesystem::path(cfg.output_dir) / "encodings.json").string(), enc);
  report["outputs"] = {onnx_path, (std::filesystem::path(cfg.output_dir) / "encodings.json").string()};
  report["seconds"] = secs(t_start);
  write_json((std::filesystem::path(cfg.output_dir) / "report.json").string(), report);
  const auto fb = quant::float_fallbacks(*gm);
  std::printf("float fallbacks: %s\n", fb.empty() ? "none" : "");
  for (const auto& f : fb) std::printf("  %s\n", f.c_str());
  for (const auto& f : model.float_fallbacks()) std::printf("  runtime: %s\n", f.c_str());
  std::printf("wrote %s, encodings.json, report.json in %s (%.1f s)\n", onnx_path.c_str(), cfg.output_dir.c_str(),
              secs(t_start));
  return 0;
}

}  // namespace qfx::cli
