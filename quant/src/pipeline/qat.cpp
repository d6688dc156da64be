// quant::qat: prepare_qat_fx, a libtorch training loop with fake quantization
// (schedules, checkpoints, resume), convert, int8 evaluation on the runtime.
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>

#include "artifacts.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/calibrate.h"
#include "qfx/quant/checkpoint.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/distributed.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/pipeline.h"
#include "qfx/runtime/model.h"

namespace qfx::quant {
using namespace pipeline;
namespace {

// Learning rate at `step` of `total` (see TrainingConfig::lr_schedule).
double lr_at(const TrainingConfig& t, int64_t step, int64_t total) {
  if (t.lr_schedule == "cosine") return 0.5 * t.lr * (1.0 + std::cos(M_PI * static_cast<double>(step) / std::max<int64_t>(total, 1)));
  if (t.lr_schedule == "step") {
    double lr = t.lr;
    for (int64_t m : t.lr_steps)
      if (step >= m) lr *= 0.1;
    return lr;
  }
  return t.lr;
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& g : opt.param_groups()) {
    if (auto* o = dynamic_cast<torch::optim::SGDOptions*>(&g.options())) o->lr(lr);
    if (auto* o = dynamic_cast<torch::optim::AdamOptions*>(&g.options())) o->lr(lr);
  }
}

// Top-1 of `gm` (libtorch, eval mode) on a dataset; also returns the predictions.
double top1(fx::GraphModule& gm, Dataset& d, int64_t bs, int64_t output, at::Tensor* pred, const std::string& what,
            const PipelineHooks& hooks) {
  at::NoGradGuard ng;
  std::vector<at::Tensor> preds;
  for (int64_t i = 0; i < d.size(); i += bs) {
    at::Tensor b = d.batch(i, std::min(i + bs, d.size()));
    preds.push_back(forward_output(gm, b, output).argmax(1));
    progress(hooks, what, i + b.size(0), d.size());
  }
  *pred = at::cat(preds);
  return pred->eq(d.labels()).to(at::kDouble).mean().item<double>();
}

}  // namespace

QatResult qat(const JobConfig& cfg, const PipelineHooks& hooks_in, distributed::Context* dist) {
  const auto t_start = Clock::now();
  const std::string& config_path = cfg.path;
  QatResult res;
  const int rank = dist ? dist->rank() : 0, world = dist && dist->active() ? dist->world_size() : 1;
  res.rank = rank;
  res.world_size = world;
  const PipelineHooks hooks = rank == 0 ? hooks_in : PipelineHooks{};  // the other ranks work silently
  if (!cfg.training.enabled) throw ConfigError(config_path + ": 'training' is required for qfx qat");
  const TrainingConfig& tc = cfg.training;
  auto backend = BackendConfig::resolve(cfg.backend);
  const std::string rt_backend = backend.runtime;
  if (!fs::exists(cfg.model.path)) throw IoError(cfg.model.path + ": model file not found (model.path in " + config_path + ")");
  if (!cfg.evaluation.enabled) throw ConfigError(config_path + ": qfx qat needs an 'evaluation' section with labels");
  set_inputs(&res, cfg, backend.name, rt_backend);
  info(hooks, "qfx qat: " + cfg.model.path + " on backend '" + backend.name + "' (runtime " + rt_backend + ", config " + config_path + ")");
  auto train = open_dataset(tc.data, cfg.model.input_shape, tc.num_samples, -1);
  note_fewer_samples(hooks, "training.num_samples", tc.num_samples, train->size());
  auto ev = open_dataset(cfg.evaluation.data, cfg.model.input_shape, cfg.evaluation.num_samples, -1);
  note_fewer_samples(hooks, "evaluation.num_samples", cfg.evaluation.num_samples, ev->size());
  if (!ev->labels().defined()) throw ConfigError(config_path + ": evaluation.data.labels is required for qfx qat");
  std::optional<Staging> out;
  if (rank == 0) open_output(&out, cfg.output.dir, hooks);
  const std::string ckpt = tc.checkpoint.empty() ? (fs::path(cfg.output.dir) / "qat_checkpoint.pt").string() : tc.checkpoint;

  torch::manual_seed(static_cast<uint64_t>(tc.seed));
  auto gm = fx::trace_file(cfg.model.path, cfg.tracer.options);
  gm->eval();
  at::Tensor fp32_pred;
  const double top1_fp32 =
      rank == 0 ? top1(*gm, *ev, cfg.evaluation.batch_size, cfg.evaluation.output, &fp32_pred, "fp32 evaluation", hooks) : 0.0;
  for (const std::string& w : prepare_qat_fx(*gm, cfg.qconfig, backend).warnings) info(hooks, "warning: " + w);
  // Optional: observers start from a calibration pass over the float graph (runtime).
  if (cfg.calibration.enabled) {
    auto cal = open_dataset(cfg.calibration.data, cfg.model.input_shape, cfg.calibration.num_samples, cfg.calibration.seed);
    CalibrateOptions co;
    co.backend = rt_backend;
    co.input_shapes = {cfg.model.input_shape};
    co.distributed = world > 1 ? dist : nullptr;
    calibrate(*gm, batches(*cal, cfg.calibration.batch_size, rank, world), co);
  }
  // Data-parallel: rank 0's model everywhere, observers synchronised in every
  // observed forward, gradients averaged before each step.
  std::unique_ptr<distributed::GradientReducer> reducer;
  if (world > 1) {
    distributed::broadcast_parameters(*gm, *dist);
    distributed::synchronize_observers(*gm, *dist);
    reducer = std::make_unique<distributed::GradientReducer>(*gm, *dist);
  }
  std::unique_ptr<torch::optim::Optimizer> opt;
  if (tc.optimizer == "adam")
    opt = std::make_unique<torch::optim::Adam>(gm->parameters(), torch::optim::AdamOptions(tc.lr).weight_decay(tc.weight_decay));
  else
    opt = std::make_unique<torch::optim::SGD>(
        gm->parameters(), torch::optim::SGDOptions(tc.lr).momentum(tc.momentum).weight_decay(tc.weight_decay));
  // A step takes one global batch of bs x world samples; rank r trains on its r-th slice.
  const int64_t n = train->size(), bs = tc.batch_size, gbs = bs * world, steps_per_epoch = (n + gbs - 1) / gbs;
  int64_t total = tc.epochs * steps_per_epoch;
  if (tc.max_steps > 0) total = std::min(total, tc.max_steps);
  // Every rank must have samples in every step it takes (the observer synchronisation
  // runs inside the forward): checked here, the same on every rank, before any training.
  if (const int64_t last = n % gbs; world > 1 && total >= steps_per_epoch && last != 0 && last <= (world - 1) * bs)
    throw ConfigError(config_path + ": the last global batch of each epoch (" + std::to_string(last) + " samples) leaves rank " +
                      std::to_string(world - 1) + " without samples; make training.num_samples a multiple of batch_size x processes (" +
                      std::to_string(gbs) + ")");
  int64_t step = 0;
  if (!tc.resume.empty()) {
    step = load_qat_checkpoint(tc.resume, *gm, *opt);
    res.resumed_at = step;
    info(hooks, "resumed from " + tc.resume + " at step " + std::to_string(step));
  }
  // The schedule is a function of the step, so a resumed run re-applies it.
  auto apply_schedule = [&](int64_t s) {
    if (tc.freeze_bn_after >= 0 && s >= tc.freeze_bn_after) freeze_bn_stats(*gm);
    if (tc.disable_observer_after >= 0 && s >= tc.disable_observer_after) disable_observer(*gm);
  };
  apply_schedule(step);
  double loss_ema = 0, step_seconds = 0;
  int64_t timed_steps = 0;
  // The training curve for report.json / report.html: about 100 points over the run
  // (and each epoch's end): the loss's moving average and the epoch's running accuracy.
  nlohmann::json curve = nlohmann::json::array();
  const int64_t curve_every = std::max<int64_t>(1, (total - step) / 100);
  double curve_loss = 0, curve_acc = 0;  // moving averages over the whole run (no reset per epoch)
  int64_t curve_n = 0;
  while (step < total) {
    const int64_t epoch = step / steps_per_epoch;
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::mt19937_64 rng(static_cast<uint64_t>(tc.seed) * 1000003u + static_cast<uint64_t>(epoch));
    std::shuffle(order.begin(), order.end(), rng);
    const std::string stage = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(tc.epochs);
    int64_t correct = 0, seen = 0;
    gm->train();
    for (int64_t k = step % steps_per_epoch; k < steps_per_epoch && step < total; ++k, ++step) {
      apply_schedule(step);
      const int64_t g0 = k * gbs, g1 = std::min(g0 + gbs, n);  // this step's global batch
      const int64_t b0 = std::min(g0 + rank * bs, g1), b1 = std::min(b0 + bs, g1);
      std::vector<int64_t> pos(order.begin() + b0, order.begin() + b1);
      const auto t0 = Clock::now();
      set_lr(*opt, lr_at(tc, step, total));
      opt->zero_grad();
      at::Tensor x = train->gather(pos), y = train->labels().index_select(0, at::tensor(pos, at::kLong));
      at::Tensor logits = forward_output(*gm, x, cfg.evaluation.output);
      at::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
      // Averaged over ranks, the gradients are those of the global batch's mean loss.
      (loss * (static_cast<double>(pos.size() * world) / static_cast<double>(g1 - g0))).backward();
      if (reducer) reducer->reduce();
      opt->step();
      step_seconds += secs(t0);
      ++timed_steps;
      const double l = loss.item<double>();
      loss_ema = (step == 0 || k == 0) ? l : 0.95 * loss_ema + 0.05 * l;
      correct += logits.argmax(1).eq(y).sum().item<int64_t>();
      seen += static_cast<int64_t>(pos.size());
      char extra[96];
      std::snprintf(extra, sizeof extra, "loss %.3f  acc %.1f%%  lr %.4f", loss_ema, 100.0 * correct / std::max<int64_t>(seen, 1),
                    lr_at(tc, step, total));
      progress(hooks, stage, g1, n, extra);
      const double batch_acc = logits.argmax(1).eq(y).to(at::kDouble).mean().item<double>();
      const double a = curve_n++ == 0 ? 1.0 : 0.05;
      curve_loss += a * (l - curve_loss);
      curve_acc += a * (batch_acc - curve_acc);
      if ((step + 1) % curve_every == 0 || k + 1 == steps_per_epoch || step + 1 == total)
        curve.push_back({{"step", step + 1}, {"epoch", epoch + 1}, {"loss", curve_loss}, {"train_accuracy", curve_acc}});
    }
    if (rank == 0) save_qat_checkpoint(ckpt, *gm, *opt, step);
  }
  if (world > 1) {
    reducer.reset();  // its hooks go quiet: rank 0's timing backward below runs alone
    distributed::synchronize_observers(*gm, *dist, false);
    // Every rank must hold the same qparams: rank 0 checks, then the others are done.
    std::vector<at::Tensor> q;
    for (const auto& m : gm->modules(false))
      if (auto* fq = dynamic_cast<FakeQuantize*>(m.get())) {
        QParams p = fq->qparams();
        q.push_back(p.scale.to(at::kDouble).reshape({-1}));
        q.push_back(p.zero_point.to(at::kDouble).reshape({-1}));
      }
    const at::Tensor all = dist->all_gather(q.empty() ? at::zeros({1}, at::kDouble) : at::cat(q), "qparams check");
    res.qparams_identical_on_all_ranks = true;
    for (int r = 1; r < world; ++r) res.qparams_identical_on_all_ranks &= at::equal(all[0], all[r]);
    if (rank != 0) {
      res.steps = step;
      res.seconds = secs(t_start);
      return res;
    }
  }
  // Cost of fake quantization: forward + backward on one training batch with fake
  // quant on and off (observers and batch-norm statistics frozen, no optimizer step).
  double ms_fq = 0, ms_float = 0;
  {
    disable_observer(*gm);
    freeze_bn_stats(*gm);
    std::vector<int64_t> pos(static_cast<size_t>(std::min(bs, n)));
    std::iota(pos.begin(), pos.end(), int64_t{0});
    at::Tensor x = train->gather(pos), y = train->labels().index_select(0, at::tensor(pos, at::kLong));
    auto time_steps = [&]() {
      std::vector<double> t;
      for (int i = 0; i < 7; ++i) {
        const auto t0 = Clock::now();
        gm->zero_grad();
        torch::nn::functional::cross_entropy(gm->forward(x), y).backward();
        t.push_back(1000.0 * secs(t0));
      }
      std::sort(t.begin(), t.end());
      return t[t.size() / 2];
    };
    set_quant_state(*gm, QuantState::kFloat);
    ms_float = time_steps();
    set_quant_state(*gm, QuantState::kFakeQuant);
    disable_observer(*gm);
    ms_fq = time_steps();
    gm->zero_grad();
  }
  gm->eval();
  set_quant_state(*gm, QuantState::kFakeQuant);
  disable_observer(*gm);
  at::Tensor fq_pred;
  const double top1_fq = top1(*gm, *ev, cfg.evaluation.batch_size, cfg.evaluation.output, &fq_pred, "fake-quant evaluation", hooks);
  // Convert and run the int8 model on the runtime.
  const std::string onnx_path = out->path("model_int8.onnx");
  ExportResult conv = convert_model(*gm, onnx_path, cfg.model.input_shape, &res.converted, backend.arithmetic);
  auto int8 = runtime::Model::load(onnx_path, {rt_backend});
  const std::string out_name = output_name(int8, cfg.evaluation.output, config_path);
  std::vector<at::Tensor> preds;
  const int64_t ebs = cfg.evaluation.batch_size;
  for (int64_t i = 0; i < ev->size(); i += ebs) {
    at::Tensor b = ev->batch(i, std::min(i + ebs, ev->size()));
    preds.push_back(to_aten(int8.run({{"input", wrap(b)}}).at(out_name)).argmax(1));
    progress(hooks, "int8 evaluation", i + b.size(0), ev->size());
  }
  at::Tensor q_pred = at::cat(preds);
  // The reference backend must compute the same int8 outputs, bit for bit (as qfx ptq checks).
  const int64_t nr = cfg.evaluation.reference_check < 0 ? ev->size() : std::min(cfg.evaluation.reference_check, ev->size());
  if (nr > 0 && rt_backend != "reference") {
    auto ref_model = runtime::Model::load(onnx_path, {"reference"});
    for (int64_t i = 0; i < nr; i += ebs) {
      std::map<std::string, runtime::Tensor> in{{"input", wrap(ev->batch(i, std::min(i + ebs, nr)))}};
      const at::Tensor r = to_aten(ref_model.run(in).at(out_name)), o = to_aten(int8.run(in).at(out_name));
      res.reference_identical += (r == o).flatten(1).all(1).sum().item<int64_t>();
      progress(hooks, "reference backend check", std::min(i + ebs, nr), nr);
    }
    res.reference_images = nr;
    res.reference_exact_expected = int8.float_fallbacks().empty();
  }
  const double top1_int8 = q_pred.eq(ev->labels()).to(at::kDouble).mean().item<double>();
  const double agree = q_pred.eq(fq_pred).to(at::kDouble).mean().item<double>();
  nlohmann::json report;
  report["versions"] = versions_json();
  report["model"] = cfg.model.path;
  report["config"] = config_path;
  report["backend"] = backend.name;
  report["training"] = {{"steps", step}, {"epochs", tc.epochs}, {"batch_size", bs}, {"processes", world}, {"optimizer", tc.optimizer},
                        {"lr", tc.lr}, {"lr_schedule", tc.lr_schedule}, {"final_loss_ema", loss_ema},
                        {"ms_per_step", timed_steps ? 1000.0 * step_seconds / static_cast<double>(timed_steps) : 0.0},
                        {"checkpoint", ckpt},
                        {"fwd_bwd_ms_fake_quant", ms_fq}, {"fwd_bwd_ms_float", ms_float}};
  if (world > 1) report["training"]["qparams_identical_on_all_ranks"] = res.qparams_identical_on_all_ranks;
  if (!curve.empty()) curve.back()["top1_fakequant"] = top1_fq;  // evaluated once, after training
  report["training"]["curve"] = curve;
  report["evaluation"] = {{"images", ev->size()}, {"top1_fp32", top1_fp32}, {"top1_fakequant", top1_fq},
                          {"top1_int8", top1_int8}, {"int8_agrees_with_fakequant", agree}};
  if (res.reference_images > 0)
    report["evaluation"]["reference_check"] = {{"images", res.reference_images}, {"identical_outputs", res.reference_identical},
                                               {"exact_expected", res.reference_exact_expected}};
  report["float_fallbacks"] = res.float_fallbacks = float_fallbacks(*gm);
  report["runtime_float_groups"] = res.runtime_float_groups = int8.float_fallbacks();
  res.kernel_report = int8.kernel_report();
  report["kernels"] = kernel_report_json(res.kernel_report);
  write_encodings(out->path("encodings.json"), conv, graph_hash(*gm), backend.name, &int8);
  res.outputs = {out->final_path("model_int8.onnx"), out->final_path("encodings.json"), out->final_path("report.json")};
  if (cfg.output.report_html) res.outputs.push_back(out->final_path("report.html"));
  report["outputs"] = res.outputs;
  write_reports(*out, report, *gm, cfg.output.report_html, secs(t_start));
  out->commit();
  res.checkpoint = ckpt;
  res.steps = step;
  res.ms_per_step = timed_steps ? 1000.0 * step_seconds / static_cast<double>(timed_steps) : 0.0;
  res.final_loss_ema = loss_ema;
  res.fwd_bwd_ms_fake_quant = ms_fq;
  res.fwd_bwd_ms_float = ms_float;
  res.eval_images = ev->size();
  res.top1_fp32 = top1_fp32;
  res.top1_fakequant = top1_fq;
  res.top1_int8 = top1_int8;
  res.int8_agrees_with_fakequant = agree;
  res.seconds = secs(t_start);
  return res;
}

}  // namespace qfx::quant
