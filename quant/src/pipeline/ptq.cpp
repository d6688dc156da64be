// quant::ptq: trace, prepare, calibrate on the runtime, convert to int8 ONNX,
// evaluate fp32 against int8 on the runtime, per-layer SQNR, reference check, report.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "arithmetic_report.h"
#include "artifacts.h"
#include "held_out.h"
#include "../algorithms/layers.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/calibrate.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/distributed.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/pipeline.h"
#include "qfx/quant/ptq_algorithms.h"
#include "qfx/runtime/model.h"

namespace qfx::quant {
using namespace pipeline;
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

double sqnr_db(double signal, double noise) { return 10.0 * std::log10(std::max(signal, 1e-30) / std::max(noise, 1e-30)); }
// Both in double: float32 sums of squares overflow for outputs beyond 1e19 and made
// the metrics NaN. An all-zero side has no direction: cosine 1 when both are zero.
double cosine(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kDouble).flatten(), y = b.to(at::kDouble).flatten();
  const double nx = x.norm().item<double>(), ny = y.norm().item<double>();
  if (nx == 0.0 || ny == 0.0) return nx == ny ? 1.0 : 0.0;
  return (x * y).sum().item<double>() / (nx * ny);
}
double sqnr(const at::Tensor& ref, const at::Tensor& x) { return detail::sqnr_db(ref, x); }

// Per-layer error sums of one quantized tensor against its fp32 value.
struct LayerErr {
  double signal = 0, noise_fq = 0, noise_int8 = 0;
  bool has_fq = false, has_int8 = false;
};

}  // namespace

PtqResult ptq(const JobConfig& cfg, const PipelineHooks& hooks, distributed::Context* dist) {
  const auto t_start = Clock::now();
  const std::string& config_path = cfg.path;
  PtqResult res;
  if (!cfg.calibration.enabled) throw ConfigError(config_path + ": 'calibration' is required for qfx ptq");
  auto backend = BackendConfig::resolve(cfg.backend);
  const std::string rt_backend = backend.runtime;
  if (!fs::exists(cfg.model.path)) throw IoError(cfg.model.path + ": model file not found (model.path in " + config_path + ")");
  set_inputs(&res, cfg, backend.name, rt_backend);
  info(hooks, "qfx ptq: " + cfg.model.path + " on backend '" + backend.name + "' (runtime " + rt_backend + ", config " + config_path + ")");

  auto cal = open_dataset(cfg.calibration.data, cfg.model.input_shape, cfg.calibration.num_samples, cfg.calibration.seed);
  const bool have_eval = cfg.evaluation.enabled;
  std::unique_ptr<Dataset> ev;
  note_fewer_samples(hooks, "calibration.num_samples", cfg.calibration.num_samples, cal->size());
  if (have_eval) {
    ev = open_dataset(cfg.evaluation.data, cfg.model.input_shape, cfg.evaluation.num_samples, -1);
    note_fewer_samples(hooks, "evaluation.num_samples", cfg.evaluation.num_samples, ev->size());
  }
  HeldOutData held;  // ptq.auto_fallback's (read before the long work: its errors come first)
  const auto& s16_dtypes = backend.activation.dtypes;
  const bool int16_available = std::find(s16_dtypes.begin(), s16_dtypes.end(), QDType::kInt16) != s16_dtypes.end();
  if (cfg.ptq.auto_fallback) {
    const auto& cands = cfg.ptq.auto_fallback_options.candidates;
    if (!int16_available && std::find(cands.begin(), cands.end(), "float") == cands.end())
      throw ConfigError(config_path + ": ptq.auto_fallback.candidates: backend '" + backend.name +
                        "' offers no s16 activations (activation.dtypes); add float");
    held = held_out_data(cfg, cal->size(), cfg.evaluation.batch_size);
  }
  // Data-parallel: every rank calibrates its shard; rank 0 alone goes on and writes the outputs.
  const int rank = dist ? dist->rank() : 0, world = dist ? dist->world_size() : 1;
  res.rank = rank;
  res.world_size = world;
  if (world > 1) {
    const int64_t nb = (cal->size() + cfg.calibration.batch_size - 1) / cfg.calibration.batch_size;
    if (nb < world)
      throw ConfigError(config_path + ": " + std::to_string(nb) + " calibration batches for " + std::to_string(world) +
                        " processes: every process needs one (raise calibration.num_samples or lower calibration.batch_size)");
  }
  std::optional<Staging> out;
  if (rank == 0) open_output(&out, cfg.output.dir, hooks);

  const int64_t bs = cfg.calibration.batch_size, ebs = cfg.evaluation.batch_size;
  auto for_batches = [&](Dataset& d, int64_t n, const std::function<void(const at::Tensor&, int64_t)>& fn) {
    for (int64_t i = 0; i < n; i += ebs) fn(d.batch(i, std::min(i + ebs, n)), i);
  };
  const PtqAlgorithmsConfig& alg = cfg.ptq;
  nlohmann::json algorithms = nlohmann::json::object();
  nlohmann::json report_sensitivity;
  at::NoGradGuard ng;

  // Trace, prepare for `qc`, and the algorithms that run before calibration.
  size_t traced_nodes = 0;
  bool warned_qconfig = false;  // the qconfig warnings are said once, not at each re-prepare
  HostSplit host;
  auto prepare_model = [&](const QConfigMapping& qc) {
    auto g = fx::trace_file(cfg.model.path, cfg.tracer.options);
    traced_nodes = g->graph().size();
    host = split_host_postprocess(*g);  // wrapped post-processing stays on the host, in float
    g->eval();
    const PassReport prepared = prepare_fx(*g, qc, backend);
    if (!warned_qconfig)
      for (const std::string& w : prepared.warnings) info(hooks, "warning: " + w);
    warned_qconfig = true;
    if (alg.cross_layer_equalization) {
      auto pairs = cross_layer_equalization(*g);
      nlohmann::json j = nlohmann::json::array();
      for (const auto& p : pairs)
        j.push_back({{"first", p.first}, {"second", p.second}, {"spread_first_before", p.spread_first_before},
                     {"spread_first_after", p.spread_first_after}, {"spread_second_before", p.spread_second_before},
                     {"spread_second_after", p.spread_second_after}});
      algorithms["cross_layer_equalization"] = j;
      info(hooks, "cross-layer equalisation: " + std::to_string(pairs.size()) + " layer pairs");
    }
    if (alg.smoothquant) {
      auto norms = smooth_quant(*g, batches(*cal, bs), alg.smoothquant_alpha, alg.smoothquant_samples);
      nlohmann::json j = nlohmann::json::array();
      for (const auto& s : norms)
        j.push_back({{"norm", s.norm}, {"linears", s.linears}, {"spread_before", s.spread_before}, {"spread_after", s.spread_after}});
      algorithms["smoothquant"] = j;
      info(hooks, "SmoothQuant: " + std::to_string(norms.size()) + " LayerNorm outputs smoothed");
    }
    return g;
  };
  auto gm = prepare_model(cfg.qconfig);

  // The float model as the runtime runs it (batch norm folded, observers as pass-throughs).
  ExportOptions fo;
  fo.float_model = true;
  fo.input_shapes = {cfg.model.input_shape};
  fo.input_names = {"input"};
  ExportResult fr;
  const std::string float_onnx = export_onnx_bytes(*gm, fo, &fr);
  std::map<std::string, std::string> fp32_tensor_of;  // fx node -> fp32 ONNX value
  std::vector<std::string> keep;
  for (const auto& o : fr.observed) {
    fp32_tensor_of[o.node] = o.tensor;
    keep.push_back(o.tensor);
  }
  // Two loads of the float graph: as deployed (fused, channels last) for evaluation and
  // latency, and with the observed values kept for the per-layer SQNR table.
  auto fp32 = runtime::Model::load_from_string(float_onnx, {rt_backend, false}, cfg.model.path + " (float graph)");
  runtime::ModelOptions fmo(rt_backend, false);
  fmo.keep_values = keep;
  auto fp32_watch = runtime::Model::load_from_string(float_onnx, fmo, cfg.model.path + " (float graph)");

  // Calibrate on the runtime.
  CalibrateOptions co;
  co.backend = rt_backend;
  co.input_shapes = {cfg.model.input_shape};
  const int64_t ncal = cal->size();
  co.progress = [&](int64_t n) { progress(hooks, "calibration", n, ncal); };
  auto calibrate_model = [&](fx::GraphModule& g, distributed::Context* d) {
    CalibrateOptions o = co;
    o.distributed = d;
    auto r = calibrate(g, batches(*cal, bs, d ? d->rank() : 0, d ? d->world_size() : 1), o);
    set_quant_state(g, QuantState::kFakeQuant);
    disable_observer(g);
    return r;
  };
  auto cr = calibrate_model(*gm, dist);
  if (rank != 0) {  // a worker: its observers equal rank 0's; rank 0 converts and writes
    res.calibration = cr;
    res.calibration_images_per_s = static_cast<double>(cr.images) / std::max(cr.seconds, 1e-9);
    res.seconds = secs(t_start);
    return res;
  }

  // The independent check of the runtime's fp32 graph: libtorch's float output on
  // the first evaluation batch, taken before the algorithms below change weights.
  at::Tensor libtorch_first;
  if (have_eval && ev->size() > 0) {
    output_name(fp32, cfg.evaluation.output, config_path);  // ConfigError for an output the model lacks
    set_quant_state(*gm, QuantState::kFloat);
    libtorch_first = forward_output(*gm, ev->batch(0, std::min(ebs, ev->size())), cfg.evaluation.output);
    set_quant_state(*gm, QuantState::kFakeQuant);
    disable_observer(*gm);
  }

  if (alg.sensitivity) {
    double all_db = 0;
    auto sens = layer_sensitivity(*gm, batches(*cal, bs), alg.sensitivity_samples, &all_db);
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& s : sens)
      layers.push_back({{"layer", s.layer}, {"only_this_db", s.only_this_db}, {"all_but_this_db", s.all_but_this_db}});
    report_sensitivity = {{"metric", "output SQNR (dB) against fp32 on calibration samples, fake-quantized in libtorch"},
                          {"samples", alg.sensitivity_samples}, {"all_quantized_db", all_db}, {"layers", layers}};
    for (size_t i = 0; i < std::min<size_t>(3, sens.size()); ++i)
      info(hooks, "sensitivity #" + std::to_string(i + 1) + ": " + sens[i].layer + " (only it quantized: " +
                      std::to_string(sens[i].only_this_db).substr(0, 5) + " dB; all but it: " +
                      std::to_string(sens[i].all_but_this_db).substr(0, 5) + " dB; all: " +
                      std::to_string(all_db).substr(0, 5) + " dB)");
  }

  // Weight rounding and bias correction, against the float weights as calibrated.
  auto layer_json = [](const std::vector<LayerAlgorithmReport>& rs) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rs) {
      j.push_back({{"layer", r.layer}, {"sqnr_before_db", r.sqnr_before_db}, {"sqnr_after_db", r.sqnr_after_db},
                   {"seconds", r.seconds}});
      if (!r.kept.empty()) j.back()["kept"] = r.kept;
    }
    return j;
  };
  // Returns the float weights the algorithms started from (empty without them).
  auto refine_model = [&](fx::GraphModule& g) {
    FloatWeights reference;
    if (!alg.adaround && !alg.bias_correction) return reference;
    reference = snapshot_float_weights(g);
    if (alg.adaround) {
      AdaRoundOptions o = alg.adaround_options;
      o.progress = [&](const std::string& layer, int64_t done, int64_t total) { progress(hooks, "adaround (layers)", done, total, layer); };
      const auto t0 = Clock::now();
      algorithms["adaround"] = layer_json(adaround(g, batches(*cal, bs), o, &reference));
      info(hooks, "adaround: " + std::to_string(algorithms["adaround"].size()) + " layers in " +
                      std::to_string(static_cast<int>(secs(t0))) + " s");
    }
    if (alg.bias_correction)
      algorithms["bias_correction"] = layer_json(bias_correction(g, batches(*cal, bs), alg.bias_correction_samples, &reference));
    return reference;
  };
  const FloatWeights reference = refine_model(*gm);

  // Automatic fallback: search on this model, then prepare again from the config
  // that moves the chosen layers to float (written to the output), so the model
  // deployed is the one that config reproduces.
  nlohmann::json report_fallback;
  if (alg.auto_fallback) {
    AutoFallbackOptions o = alg.auto_fallback_options;
    o.int16_available = int16_available;
    o.progress = [&](const std::string& stage, int64_t done, int64_t total) { progress(hooks, "auto_fallback " + stage + " (layers)", done, total); };
    const AutoFallbackResult af = auto_fallback(*gm, batches(*cal, bs), held, o, reference.layers.empty() ? nullptr : &reference);
    report_fallback = auto_fallback_json(af);
    auto fmt = [](double v) {
      const std::string t = std::to_string(v);
      return t.substr(0, t.find('.') + 3);
    };
    const std::string unit = af.metric == "top1" ? " %" : " dB";
    info(hooks, "auto_fallback: " + af.metric + " on " + std::to_string(af.held_out_samples) + " held-out samples: " +
                    (af.metric == "top1" ? "fp32 " + fmt(af.fp32) + unit + ", " : "") + "quantized " + fmt(af.quantized) + unit +
                    ", target " + fmt(af.target) + unit);
    std::vector<std::string> to_float, to_int16;
    for (const auto& st : af.steps) {
      (st.moved_to == "int16" ? to_int16 : to_float).push_back(st.layer);
      info(hooks, "auto_fallback: " + st.layer + " -> " + st.moved_to + ": " + fmt(st.metric) + unit);
    }
    for (const auto& n : af.notes) info(hooks, "auto_fallback: " + n);
    const std::string moved_str = std::to_string(to_int16.size()) + " layer(s) with int16 outputs, " +
                                  std::to_string(to_float.size()) + " in float";
    info(hooks, std::string("auto_fallback: ") + (af.reached ? "target reached" : "target NOT reached") + " with " +
                    moved_str + (af.reached ? "" : " (max_layers " + std::to_string(o.max_layers) + ")"));
    const std::string final_path = out->path("config_final.yaml");
    write_file_atomic(final_path, final_config_yaml(cfg, to_float, to_int16,
                                                    "written by qfx ptq (ptq.auto_fallback) from " + config_path +
                                                        "\nrun it again: qfx ptq " + out->final_path("config_final.yaml")));
    report_fallback["config"] = out->final_path("config_final.yaml");
    if (!af.steps.empty()) {
      info(hooks, "auto_fallback: preparing again with " + moved_str);
      const JobConfig fin = load_job_config(final_path);
      gm = prepare_model(fin.qconfig);
      cr = calibrate_model(*gm, nullptr);  // rank 0 alone: the other ranks have finished
      refine_model(*gm);
    }
  }

  // Convert.
  const std::string onnx_path = out->path("model_int8.onnx");
  ExportResult conv = convert_model(*gm, onnx_path, cfg.model.input_shape, &res.converted, backend.arithmetic);
  auto int8 = runtime::Model::load(onnx_path, {rt_backend});
  const std::string out_name = output_name(int8, cfg.evaluation.output, config_path);
  const double cal_rate = static_cast<double>(cr.images) / std::max(cr.seconds, 1e-9);

  nlohmann::json report;
  report["versions"] = versions_json();
  report["model"] = cfg.model.path;
  report["config"] = config_path;
  report["backend"] = backend.name;
  report["runtime_backend"] = rt_backend;
  report["algorithms"] = algorithms;
  report["traced_nodes"] = traced_nodes;
  res.host_postprocess = host;
  if (!host.empty()) report["host_postprocess"] = {{"nodes", host.host_nodes}, {"model_outputs", host.outputs}};
  if (!report_sensitivity.is_null()) report["sensitivity"] = report_sensitivity;
  if (!report_fallback.is_null()) {
    // The deployed model's metric on the held-out samples (the search measured fake quantization in libtorch).
    std::vector<at::Tensor> f, q;
    for (const auto& b : held.batches) {
      std::map<std::string, runtime::Tensor> in{{"input", wrap(b.at(0))}};
      f.push_back(to_aten(fp32.run(in).at(out_name)));
      q.push_back(to_aten(int8.run(in).at(out_name)));
    }
    const at::Tensor fo = at::cat(f), qo = at::cat(q);
    report_fallback["deployed"] = alg.auto_fallback_options.metric == "top1"
        ? nlohmann::json{{"fp32", 100.0 * fo.argmax(1).eq(held.labels).to(at::kDouble).mean().item<double>()},
                         {"int8", 100.0 * qo.argmax(1).eq(held.labels).to(at::kDouble).mean().item<double>()}}
        : nlohmann::json{{"sqnr_db", sqnr(fo, qo)}};
    report["auto_fallback"] = report_fallback;
  }
  report["calibration"] = {{"images", cr.images}, {"images_per_s", cal_rate}, {"engine", cr.engine}, {"threads", cr.threads}, {"processes", world},
                           {"seconds", cr.seconds}, {"observed_tensors", cr.observed_tensors}};
  if (!cr.fallback_reason.empty()) report["calibration"]["fallback_reason"] = cr.fallback_reason;
  report["float_fallbacks"] = res.float_fallbacks = float_fallbacks(*gm);
  report["runtime_float_groups"] = res.runtime_float_groups = int8.float_fallbacks();
  report["export_float_ops"] = res.export_float_ops = conv.float_ops;
  res.kernel_report = int8.kernel_report();
  report["kernels"] = kernel_report_json(res.kernel_report);
  res.calibration = cr;
  res.calibration_images_per_s = cal_rate;

  if (have_eval) {
    const int64_t n = ev->size();
    std::vector<at::Tensor> fp_outs, q_outs;
    // Latency leaves out the first batch, which also builds the plans (kernels, packed weights).
    double t_fp32 = 0, t_int8 = 0, libtorch_rel = 0;
    int64_t timed = 0;
    int8.set_profiling(true);  // where the int8 time goes, per node (report.json "profile_int8")
    for_batches(*ev, n, [&](const at::Tensor& b, int64_t i) {
      std::map<std::string, runtime::Tensor> in{{"input", wrap(b)}};
      const bool time_it = i > 0 || n <= ebs;
      auto t0 = Clock::now();
      at::Tensor f = to_aten(fp32.run(in).at(out_name));
      if (time_it) t_fp32 += secs(t0);
      t0 = Clock::now();
      at::Tensor q = to_aten(int8.run(in).at(out_name));
      if (time_it) {
        t_int8 += secs(t0);
        timed += b.size(0);
      }
      if (i == 0) {  // independent check: the runtime's fp32 against libtorch on the first batch
        const at::Tensor& ref = libtorch_first;
        libtorch_rel = ((f - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item<double>();
      }
      fp_outs.push_back(f);
      q_outs.push_back(q);
      progress(hooks, "evaluation (fp32 + int8)", i + b.size(0), n);
    });
    at::Tensor fp = at::cat(fp_outs), q = at::cat(q_outs);
    report["profile_int8"] = profile_json(int8, n);
    int8.set_profiling(false);
    PtqEvaluation& E = res.evaluation;
    res.evaluated = true;
    E.images = n;
    E.batch_size = ebs;
    E.metric = cfg.evaluation.metric;
    E.fp32_runtime_vs_libtorch_max_rel_error = libtorch_rel;
    E.cosine_int8_vs_fp32 = cosine(q, fp);
    E.sqnr_db_int8_vs_fp32 = sqnr(fp, q);
    // A float model whose output is the same for every sample (all zero, a dead
    // network) makes any agreement metric meaningless: say so.
    const bool constant_output = n > 1 && (fp - fp.select(0, 0).unsqueeze(0)).abs().max().item<double>() == 0.0;
    if (constant_output)
      info(hooks, "warning: the float model's output is the same for every evaluated sample; cosine, SQNR and "
                  "top-1 agreement say nothing about the quantization");
    E.fp32_ms_per_image = 1000.0 * t_fp32 / static_cast<double>(std::max<int64_t>(timed, 1));
    E.int8_ms_per_image = 1000.0 * t_int8 / static_cast<double>(std::max<int64_t>(timed, 1));
    report["evaluation"] = {{"images", n},
                            {"batch_size", ebs},
                            {"metric", cfg.evaluation.metric},
                            {"fp32_runtime_vs_libtorch_max_rel_error", libtorch_rel},
                            {"cosine_int8_vs_fp32", E.cosine_int8_vs_fp32},
                            {"sqnr_db_int8_vs_fp32", E.sqnr_db_int8_vs_fp32},
                            {"fp32_output_constant", constant_output},
                            {"fp32_ms_per_image", E.fp32_ms_per_image},
                            {"int8_ms_per_image", E.int8_ms_per_image}};
    if (cfg.evaluation.metric == "top1") {
      if (!ev->labels().defined())
        throw ConfigError(config_path + ": evaluation.metric top1 needs labels (evaluation.data.labels)");
      const at::Tensor& y = ev->labels();
      E.has_top1 = true;
      E.top1_fp32 = fp.argmax(1).eq(y).to(at::kDouble).mean().item<double>();
      E.top1_int8 = q.argmax(1).eq(y).to(at::kDouble).mean().item<double>();
      E.prediction_agreement = q.argmax(1).eq(fp.argmax(1)).to(at::kDouble).mean().item<double>();
      report["evaluation"]["top1_fp32"] = E.top1_fp32;
      report["evaluation"]["top1_int8"] = E.top1_int8;
      report["evaluation"]["prediction_agreement"] = E.prediction_agreement;
    }

    // Per-layer SQNR: every quantized activation, fake-quant (Q/DQ simulated on the
    // runtime) and int8 (the deployed kernels), against the fp32 value.
    const int64_t ns = std::min(cfg.evaluation.sqnr_samples, n);
    if (ns > 0) {
      auto fq = runtime::Model::load(onnx_path, {rt_backend, /*fuse_qdq=*/false});
      std::map<std::string, const Encoding*> enc_of_q;  // quantized tensor -> encoding
      std::vector<std::string> w_fp, w_fq, w_int8;
      const auto fq_names = fq.value_names(), int8_names = int8.value_names();
      auto has = [](const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); };
      std::map<std::string, std::string> node_of_fp;  // fp32 tensor -> node
      for (const auto& e : conv.encodings) {
        auto it = fp32_tensor_of.find(e.node);
        // Per-channel encodings, and constants quantized as activations (a position
        // embedding), are not layers.
        if (it == fp32_tensor_of.end() || e.axis >= 0 || fp32_watch.constant(it->second)) continue;
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
            const Encoding& e = *enc_of_q.at(name);
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
      E.sqnr_images = ns;
      for (const auto& r : rows) E.layers.push_back({r.node, r.fq, r.q, r.has_q});
    }

    // A target arithmetic: what it changes against ONNX's float requantization.
    if (!backend.arithmetic.is_float()) {
      info(hooks, "target arithmetic: " + backend.arithmetic.describe());
      report["target_arithmetic"] = detail::compare_arithmetic(int8, onnx_path, rt_backend, conv, *ev,
                                                               std::max<int64_t>(cfg.evaluation.sqnr_samples, 1), ebs, out_name,
                                                               cfg.evaluation.metric == "top1", E);
    }

    // The reference backend must give the same int8 outputs, bit for bit.
    const int64_t nr = cfg.evaluation.reference_check < 0 ? n : std::min(cfg.evaluation.reference_check, n);
    if (nr > 0 && rt_backend != "reference") {
      auto ref_model = runtime::Model::load(onnx_path, {"reference"});
      int64_t identical = 0;
      double max_diff = 0;
      for_batches(*ev, nr, [&](const at::Tensor& b, int64_t i) {
        at::Tensor r = to_aten(ref_model.run({{"input", wrap(b)}}).at(out_name));
        at::Tensor o = q.slice(0, i, i + b.size(0));
        identical += (r == o).flatten(1).all(1).sum().item<int64_t>();
        max_diff = std::max(max_diff, (r - o).abs().max().item<double>());
        progress(hooks, "reference backend check", i + b.size(0), nr);
      });
      // Bit for bit is the claim for int8 ops. Float groups in the int8 model (layers
      // kept float, ops without int8 kernels) sum in each backend's own order, so
      // their outputs (and codes requantized from them) may differ by rounding.
      // Float ops that only move values (or dequantize the output) are exact everywhere;
      // any other float op (a conv whose input went through a float reshape, a sum)
      // counts as a float group.
      static const std::set<std::string> moves = {"DequantizeLinear", "Identity", "Reshape", "Transpose", "Slice", "Concat",
                                                  "Flatten", "Squeeze", "Unsqueeze", "Gather", "Expand", "Split", "MaxPool"};
      bool float_compute = false;
      for (const auto& k : res.kernel_report) float_compute |= !k.folded && k.dtype == "float32" && !moves.count(k.op);
      E.reference_exact_expected = res.runtime_float_groups.empty() && !float_compute;
      report["evaluation"]["reference_check"] = {{"images", nr}, {"identical_outputs", identical}, {"max_abs_diff", max_diff},
                                                 {"exact_expected", E.reference_exact_expected}};
      E.reference_images = nr;
      E.reference_identical = identical;
      E.reference_max_abs_diff = max_diff;
    }
  }

  write_encodings(out->path("encodings.json"), conv, graph_hash(*gm), backend.name, &int8);
  report["outputs"] = {out->final_path("model_int8.onnx"), out->final_path("encodings.json"), out->final_path("report.json")};
  if (cfg.output.float_model) {
    write_file_atomic(out->path("model_fp32.onnx"), float_onnx);
    report["outputs"].push_back(out->final_path("model_fp32.onnx"));
  }
  if (cfg.output.report_html) report["outputs"].push_back(out->final_path("report.html"));
  write_reports(*out, report, *gm, cfg.output.report_html, secs(t_start));
  out->commit();
  res.outputs = report["outputs"].get<std::vector<std::string>>();
  res.seconds = secs(t_start);
  return res;
}

}  // namespace qfx::quant
