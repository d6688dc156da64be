// QAT training stage: the libtorch loop with fake quantization (optimizer,
// learning-rate schedule, freeze_bn_after / disable_observer_after, a checkpoint
// after every epoch, resume, data-parallel gradient averaging), on the CPU or a CUDA
// device (training.device).
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <numeric>
#include <random>

#include "qfx/quant/checkpoint.h"
#include "qfx/quant/distributed.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/torch_device.h"
#include "metrics.h"
#include "stages.h"
#include "world_check.h"

namespace qfx::quant::pipeline {
namespace {

// Cross-entropy of class scores [N, K] (or [N, K, H, W]) against labels [N] (or per
// pixel [N, H, W]); labels outside [0, K) (255 on VOC's borders) are ignored. Throws
// DataError naming `labels_file` when the labels' shape is not the scores' without K.
at::Tensor class_loss(const at::Tensor& logits, const at::Tensor& labels, const std::string& labels_file) {
  std::vector<int64_t> want = logits.sizes().vec();
  want.erase(want.begin() + 1);
  if (labels.sizes() != at::IntArrayRef(want))
    throw DataError(labels_file + ": labels " + c10::str(labels.sizes()) + " do not match the model's predictions " +
                    c10::str(at::IntArrayRef(want)));
  const int64_t K = logits.size(1);
  const at::Tensor y = labels.masked_fill(labelled(labels, K).logical_not(), -100);
  return torch::nn::functional::cross_entropy(logits, y, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

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

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainingConfig& tc, fx::GraphModule& gm) {
  if (tc.optimizer == "adam")
    return std::make_unique<torch::optim::Adam>(gm.parameters(), torch::optim::AdamOptions(tc.lr).weight_decay(tc.weight_decay));
  return std::make_unique<torch::optim::SGD>(gm.parameters(),
                                             torch::optim::SGDOptions(tc.lr).momentum(tc.momentum).weight_decay(tc.weight_decay));
}

// The run's shape: a step takes one global batch of batch_size x world samples.
struct Schedule {
  int64_t n = 0, bs = 0, gbs = 0, steps_per_epoch = 0, total = 0;
};

Schedule schedule(const Job& job, int64_t n, int world) {
  const TrainingConfig& tc = job.cfg.training;
  Schedule s{n, tc.batch_size, tc.batch_size * world, 0, 0};
  s.steps_per_epoch = (n + s.gbs - 1) / s.gbs;
  s.total = tc.epochs * s.steps_per_epoch;
  if (tc.max_steps > 0) s.total = std::min(s.total, tc.max_steps);
  // Every rank must have samples in every step it takes: checked here, the same on
  // every rank, before any training (and by the --nproc launcher before it starts them).
  check_training_world(job.cfg, n, world);
  return s;
}

// The moving averages the training curve draws (over the whole run, no reset per epoch).
struct Curve {
  int64_t every = 1, n = 0;
  double loss = 0, acc = 0;
  void add(double l, double batch_acc) {
    const double a = n++ == 0 ? 1.0 : 0.05;
    loss += a * (l - loss);
    acc += a * (batch_acc - acc);
  }
};

// The state one training step reads and advances.
struct Loop {
  const Job& job;
  fx::GraphModule& gm;
  Dataset& train;
  torch::optim::Optimizer& opt;
  distributed::GradientReducer* reducer;
  const Schedule& s;
  torch::Device device;  // where the steps run (training.device)
  int rank, world;
  QatResult* r;
  Curve curve;
  double step_seconds = 0;
  int64_t timed_steps = 0;
};

// One optimizer step on this rank's slice of global batch `k` of the epoch.
void train_step(Loop& L, const std::vector<int64_t>& order, int64_t k, int64_t step, int64_t* correct, int64_t* seen) {
  const TrainingConfig& tc = L.job.cfg.training;
  const int64_t g0 = k * L.s.gbs, g1 = std::min(g0 + L.s.gbs, L.s.n);  // this step's global batch
  const int64_t b0 = std::min(g0 + L.rank * L.s.bs, g1), b1 = std::min(b0 + L.s.bs, g1);
  std::vector<int64_t> pos(order.begin() + b0, order.begin() + b1);
  const auto t0 = Clock::now();
  set_lr(L.opt, lr_at(tc, step, L.s.total));
  L.opt.zero_grad();
  std::vector<at::Tensor> x = L.train.gather_inputs(pos);
  for (at::Tensor& t : x) t = t.to(L.device);
  at::Tensor y = L.train.labels().index_select(0, at::tensor(pos, at::kLong));  // on the host, for the counts
  at::Tensor logits = forward_output(L.gm, x, L.job.output);
  at::Tensor loss = class_loss(logits, y.to(L.device), tc.data.labels);
  // Averaged over ranks, the gradients are those of the global batch's mean loss.
  (loss * (static_cast<double>(pos.size() * L.world) / static_cast<double>(g1 - g0))).backward();
  if (L.reducer) L.reducer->reduce();
  L.opt.step();
  L.step_seconds += secs(t0);
  ++L.timed_steps;
  const double l = loss.item<double>();
  L.r->final_loss_ema = (step == 0 || k == 0) ? l : 0.95 * L.r->final_loss_ema + 0.05 * l;
  // Accuracy per sample, or per labelled pixel for per-pixel labels.
  const LabelHits h = label_hits(logits.argmax(1).to(at::kCPU), y, logits.size(1), tc.data.labels);
  *correct += h.right;
  *seen += h.labelled;
  L.curve.add(l, static_cast<double>(h.right) / static_cast<double>(std::max<int64_t>(h.labelled, 1)));
  char extra[96];
  std::snprintf(extra, sizeof extra, "loss %.3f  acc %.1f%%  lr %.4f", L.r->final_loss_ema,
                100.0 * static_cast<double>(*correct) / static_cast<double>(std::max<int64_t>(*seen, 1)), lr_at(tc, step, L.s.total));
  progress(L.job.hooks, "epoch " + std::to_string(step / L.s.steps_per_epoch + 1) + "/" + std::to_string(tc.epochs), g1, L.s.n, extra);
}

// The rest of the epoch that `step` is in; returns the step reached.
int64_t train_epoch(Loop& L, int64_t step, const std::function<void(int64_t)>& apply_schedule) {
  const TrainingConfig& tc = L.job.cfg.training;
  const int64_t epoch = step / L.s.steps_per_epoch;
  std::vector<int64_t> order(static_cast<size_t>(L.s.n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 rng(static_cast<uint64_t>(tc.seed) * 1000003u + static_cast<uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), rng);
  int64_t correct = 0, seen = 0;
  L.gm.train();
  for (int64_t k = step % L.s.steps_per_epoch; k < L.s.steps_per_epoch && step < L.s.total; ++k, ++step) {
    apply_schedule(step);
    train_step(L, order, k, step, &correct, &seen);
    if ((step + 1) % L.curve.every == 0 || k + 1 == L.s.steps_per_epoch || step + 1 == L.s.total)
      L.r->curve.push_back({step + 1, epoch + 1, L.curve.loss, L.curve.acc});
  }
  return step;
}

}  // namespace

void train_stage(const Job& job, fx::GraphModule& gm, Dataset& train, distributed::Context* dist, const std::string& ckpt,
                 QatResult* r) {
  const TrainingConfig& tc = job.cfg.training;
  const int rank = r->rank, world = r->world_size;
  // Data-parallel: rank 0's model everywhere, observers synchronised in every
  // observed forward, gradients averaged before each step.
  std::unique_ptr<distributed::GradientReducer> reducer;
  if (world > 1) {
    distributed::broadcast_parameters(gm, *dist);
    distributed::synchronize_observers(gm, *dist);
    reducer = std::make_unique<distributed::GradientReducer>(gm, *dist);
  }
  const torch::Device device = parse_torch_device(tc.device, "training.device");
  if (!device.is_cpu()) {
    info(job.hooks, "training on " + device.str() + " (libtorch's CUDA kernels, TF32 off)");
    use_full_fp32_on_gpu();
    gm.to(device);  // before the optimizer takes the parameters
  }
  auto opt = make_optimizer(tc, gm);
  const Schedule s = schedule(job, train.size(), world);
  int64_t step = 0;
  if (!tc.resume.empty()) {
    step = load_qat_checkpoint(tc.resume, gm, *opt);
    r->resumed_at = step;
    info(job.hooks, "resumed from " + tc.resume + " at step " + std::to_string(step));
  }
  // The schedule is a function of the step, so a resumed run re-applies it.
  auto apply_schedule = [&](int64_t at_step) {
    if (tc.freeze_bn_after >= 0 && at_step >= tc.freeze_bn_after) freeze_bn_stats(gm);
    if (tc.disable_observer_after >= 0 && at_step >= tc.disable_observer_after) disable_observer(gm);
  };
  apply_schedule(step);
  Loop L{job, gm, train, *opt, reducer.get(), s, device, rank, world, r, {}, 0, 0};
  L.curve.every = std::max<int64_t>(1, (s.total - step) / 100);
  while (step < s.total) {
    step = train_epoch(L, step, apply_schedule);
    if (rank == 0) save_qat_checkpoint(ckpt, gm, *opt, step);
  }
  if (!device.is_cpu()) gm.to(torch::kCPU);  // evaluation, convert and export run on the host
  r->steps = step;
  r->ms_per_step = L.timed_steps ? 1000.0 * L.step_seconds / static_cast<double>(L.timed_steps) : 0.0;
}

void fake_quant_cost_stage(const Job& job, fx::GraphModule& gm, Dataset& train, QatResult* r) {
  // Forward + backward on one training batch with fake quant on and off (observers
  // and batch-norm statistics frozen, no optimizer step); medians of 7.
  disable_observer(gm);
  freeze_bn_stats(gm);
  std::vector<int64_t> pos(static_cast<size_t>(std::min(job.cfg.training.batch_size, train.size())));
  std::iota(pos.begin(), pos.end(), int64_t{0});
  const std::vector<at::Tensor> x = train.gather_inputs(pos);
  const at::Tensor y = train.labels().index_select(0, at::tensor(pos, at::kLong));
  auto time_steps = [&]() {
    std::vector<double> t;
    for (int i = 0; i < 7; ++i) {
      const auto t0 = Clock::now();
      gm.zero_grad();
      class_loss(forward_output(gm, x, job.output), y, job.cfg.training.data.labels).backward();
      t.push_back(1000.0 * secs(t0));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  set_quant_state(gm, QuantState::kFloat);
  r->fwd_bwd_ms_float = time_steps();
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  r->fwd_bwd_ms_fake_quant = time_steps();
  gm.zero_grad();
}

}  // namespace qfx::quant::pipeline
