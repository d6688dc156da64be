// Data-parallel calibration and QAT on PyTorch's c10d (Gloo on CPU): the process
// group from torchrun's environment, observer statistics merged across ranks,
// parameters broadcast and gradients all-reduced in a user's own training loop.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace c10d {
class ProcessGroupGloo;
}
namespace torch::nn {
class Module;
}
namespace qfx::fx {
class GraphModule;
}

namespace qfx::quant::distributed {

/// Reduction of `Context::all_reduce`.
enum class Op { kSum, kMin, kMax };

/// One process's place in a data-parallel job and its c10d process group.
/// With a world size of 1 every collective is a no-op (the tensors are left as
/// they are), so single-process code needs no branches.
class Context {
 public:
  /// A single-process context (rank 0 of 1).
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /// This process's rank, 0..world_size()-1 (RANK).
  int rank() const { return rank_; }
  /// Number of processes in the job (WORLD_SIZE; 1 when unset).
  int world_size() const { return world_; }
  /// Rank on this machine (LOCAL_RANK; defaults to rank()).
  int local_rank() const { return local_rank_; }
  /// More than one process.
  bool active() const { return world_ > 1; }
  /// Collective timeout (a rank that does not join within it fails the job).
  std::chrono::milliseconds timeout() const { return timeout_; }

  /// The c10d Gloo process group (a `c10d::ProcessGroup` in libtorch 1.13, a
  /// `c10d::Backend` in 2.x). Throws ArgumentError for a single-process context.
  c10d::ProcessGroupGloo& process_group();

  /// In-place all-reduce of CPU tensors (each reduced elementwise over ranks).
  /// Throws DistributedError naming `what`, this rank and the rank that failed
  /// (when its heartbeat says so) if a peer died or the timeout passed.
  void all_reduce(std::vector<at::Tensor>& tensors, Op op, const std::string& what);
  /// In-place broadcast from `root`. Errors as all_reduce.
  void broadcast(std::vector<at::Tensor>& tensors, int root, const std::string& what);
  /// Every rank's `t` (same shape and dtype on all ranks), stacked: [world, ...t.shape].
  at::Tensor all_gather(const at::Tensor& t, const std::string& what);
  /// Starts `all_gather(t, ...)` without waiting for it (Gloo works on it in its own
  /// threads); the returned function waits and returns the stacked result, or
  /// throws as all_gather, naming `what` it is given. Collectives still complete in
  /// the order they were started on every rank.
  std::function<at::Tensor(const std::string& what)> all_gather_start(const at::Tensor& t);
  /// Waits for every rank. Errors as all_reduce.
  void barrier(const std::string& what);
  /// Starts an in-place all-reduce of `t` without waiting for it (Gloo works on it
  /// in its own threads); `wait_pending` waits for every started one.
  void all_reduce_start(const at::Tensor& t, Op op);
  /// Waits for the collectives `all_reduce_start` started. Errors as all_reduce.
  void wait_pending(const std::string& what);

 private:
  friend std::shared_ptr<Context> init_from_env(std::chrono::seconds timeout);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, world_ = 1, local_rank_ = 0;
  std::chrono::milliseconds timeout_{300000};
  [[noreturn]] void fail(const std::string& what, const std::exception& e);
};

/// The job torchrun (or `qfx ... --nproc N`) describes in the environment:
/// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR (default 127.0.0.1), MASTER_PORT
/// (default 29500). Rank 0 hosts the c10d TCPStore; every rank then joins a
/// ProcessGroupGloo. Without WORLD_SIZE (or with 1): a single-process context.
/// `timeout` bounds the rendezvous and every collective; QFX_DIST_TIMEOUT
/// (seconds) overrides it. Each rank publishes a heartbeat in the store, so a
/// failed collective can name the rank that stopped. Throws ConfigError for
/// malformed variables (naming them) and DistributedError when the group
/// cannot form within the timeout.
std::shared_ptr<Context> init_from_env(std::chrono::seconds timeout = std::chrono::seconds(300));

/// Merges the observer statistics of every rank, in place, so all ranks hold the
/// same statistics and therefore compute the same qparams:
/// - min/max observers (per tensor or per channel, running or moving average):
///   all-reduce min and max. Exact and idempotent; for moving averages exact
///   when the ranks' values were equal before their last update (the update is
///   monotone in the batch's min/max, so min over ranks of the updated values is
///   the update with the global batch min). Call it after every step in which
///   observers are enabled (QAT).
/// - histogram observers: every rank's histogram is merged into each in rank
///   order (HistogramObserver::merge: exact when the bin grids align). Not
///   idempotent: call it once, after calibration.
/// Throws DistributedError as Context::all_reduce.
void all_reduce_observers(fx::GraphModule& gm, Context& ctx);

/// Data-parallel QAT: makes every FakeQuantize of `gm` all-reduce its
/// observer's min/max right after observing (one collective per call), so the
/// qparams each rank fake-quantizes with are those of the global batch
/// (min/max and moving-average observers; exact, see all_reduce_observers).
/// Every rank must run the same forward calls while observers are enabled.
/// `ctx` must outlive the model's use; `enable = false` removes the hooks.
/// Throws ConfigError for a histogram observer (it cannot be merged per step).
void synchronize_observers(fx::GraphModule& gm, Context& ctx, bool enable = true);

/// Copies rank 0's parameters and buffers into every rank's `module`.
void broadcast_parameters(torch::nn::Module& module, Context& ctx);

/// DDP-style gradient averaging for a user's loop. Parameters are grouped in
/// buckets of about `bucket_bytes` in reverse registration order (the order
/// backward produces their gradients); a hook on each parameter starts a
/// bucket's all-reduce (flattened, one collective) as soon as backward has
/// produced all of its gradients, so communication overlaps the rest of
/// backward. `reduce()`, after `loss.backward()`, starts the buckets still
/// waiting (parameters without a gradient take part with zeros), waits for all,
/// and writes the gradients divided by the world size, so every rank steps with
/// the gradient of the global batch's mean loss. One backward per step (as
/// DDP without no_sync). The hooks stay on the parameters but do nothing once
/// the reducer is destroyed.
class GradientReducer {
 public:
  GradientReducer(torch::nn::Module& module, Context& ctx, int64_t bucket_bytes = 25 << 20);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;
  /// Finishes the all-reduce and averages the gradients. Throws DistributedError.
  void reduce();
  /// Buckets whose all-reduce started during the last backward (before `reduce`).
  int64_t overlapped_buckets() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace qfx::quant::distributed
