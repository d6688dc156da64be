// Data-parallel calibration in lockstep (see lockstep.h).
#include "lockstep.h"

#include <ATen/ATen.h>

#include <csignal>
#include <cstdlib>
#include <limits>

#include "qfx/error.h"
#include "qfx/quant/observer.h"
#include "qfx/quant/runtime_tensor.h"

namespace qfx::quant::detail {

void calibrate_lockstep(fx::GraphModule& gm, const NextBatch& next, distributed::Context& ctx,
                        const std::map<std::string, std::vector<FakeQuantize*>>& observers, const RunBatch& run_batch,
                        const std::function<void(int64_t)>& progress, CalibrationResult* res) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // Every observation of a run, in the order a run makes them (the same on every rank).
  size_t per_run = 0;
  for (const auto& kv : observers) {
    per_run += kv.second.size();
    for (FakeQuantize* fq : kv.second) {
      auto* pc = dynamic_cast<PerChannelMinMaxObserver*>(&fq->observer());
      if (pc && pc->averaging_constant() != 0)
        throw ConfigError("distributed calibration: the per-channel moving-average observer of '" + fq->observer().tensor_name() +
                          "' depends on the order of batches and cannot be merged exactly; use minmax or histogram");
    }
  }
  std::vector<FakeQuantize*> slots;  // learned from the first run
  std::vector<std::pair<FakeQuantize*, at::Tensor>> held;
  // Buffers the held copies live in, by observation: reused from step to step (a
  // fresh allocation per step costs page faults and zeroing on every step).
  std::vector<at::Tensor> pool;
  std::vector<float> ranges;
  // Rank 0's batch comes first in every step, so rank 0 feeds its observers while
  // the value is in cache; the other ranks keep copies until the ranks before them replayed.
  const bool feed_now = ctx.rank() == 0;
  auto record = [&](const std::string& name, const runtime::Tensor& value) {
    if (value.dtype() != runtime::DType::kFloat32) return;
    at::Tensor t = aten_view(value);
    for (FakeQuantize* fq : observers.at(name)) {
      if (feed_now) fq->forward(t);
      at::Tensor copy;
      if (!feed_now) {
        const size_t k = held.size();
        if (pool.size() <= k) pool.resize(k + 1);
        if (!pool[k].defined() || pool[k].sizes() != t.sizes()) pool[k] = at::empty_like(t, at::MemoryFormat::Contiguous);
        copy = pool[k].copy_(t);
      }
      held.emplace_back(fq, copy);
      // Rank 0's observers computed the range while feeding (an observer that is off
      // is never replayed, so its range does not matter).
      float lo = kInf, hi = -kInf;
      const bool known = feed_now && (!fq->observer_enabled() || fq->observer().last_batch_range(&lo, &hi));
      if (t.numel() > 0 && !known) {
        auto [l, h] = at::aminmax(t);
        lo = l.item<float>(), hi = h.item<float>();
      }
      ranges.insert(ranges.end(), {lo, hi});
    }
  };
  const int world = ctx.world_size(), rank = ctx.rank();
  // Test hook: QFX_TEST_KILL_RANK=r makes rank r die (SIGKILL) at its second step,
  // as a crashed or OOM-killed process would.
  const char* kill_env = std::getenv("QFX_TEST_KILL_RANK");
  const int kill_rank = kill_env && *kill_env ? std::atoi(kill_env) : -1;
  for (int64_t step = 0;; ++step) {
    if (step == 1 && rank == kill_rank) ::raise(SIGKILL);
    std::vector<at::Tensor> batch = next();
    held.clear();
    ranges.clear();
    const bool have = !batch.empty();
    if (have) {
      run_batch(batch, record);
      if (slots.empty())
        for (const auto& h : held) slots.push_back(h.first);
      if (held.size() != slots.size() || held.size() > per_run)
        throw std::logic_error("distributed calibration: a run made " + std::to_string(held.size()) + " observations, the first " +
                               std::to_string(slots.size()));
    }
    // Row: [has a batch, images, then lo, hi per observation] (doubles hold the floats exactly).
    at::Tensor row = at::zeros({static_cast<int64_t>(2 + 2 * per_run)}, at::kDouble);
    if (have) {
      row[0] = 1.0;
      row[1] = static_cast<double>(batch[0].size(0));
      for (size_t i = 0; i < ranges.size(); ++i) row[static_cast<int64_t>(2 + i)] = static_cast<double>(ranges[i]);
    }
    const at::Tensor all = ctx.all_gather(row, "calibration step " + std::to_string(step));
    const auto a = all.accessor<double, 2>();
    int active = 0;
    for (int r = 0; r < world; ++r) active += a[r][0] != 0;
    if (active == 0) break;
    if (step == 0 && active < world)
      throw ConfigError("distributed calibration: " + std::to_string(active) + " of " + std::to_string(world) +
                        " ranks have a calibration batch; give every rank at least one (more calibration.num_samples, a smaller "
                        "calibration.batch_size, or fewer processes)");
    for (int r = 0; r < world; ++r) {
      if (a[r][0] == 0) continue;
      res->images += static_cast<int64_t>(a[r][1]);
      ++res->batches;
      if (r == rank) {
        if (!feed_now)
          for (auto& [fq, t] : held) fq->forward(t);
        continue;
      }
      for (size_t k = 0; k < slots.size(); ++k) {
        const float lo = static_cast<float>(a[r][static_cast<int64_t>(2 + 2 * k)]);
        const float hi = static_cast<float>(a[r][static_cast<int64_t>(3 + 2 * k)]);
        if (lo > hi || !slots[k]->observer_enabled()) continue;  // an empty tensor, or an observer that is off
        slots[k]->observer().replay_range(lo, hi);
      }
    }
    if (progress) progress(res->images);
  }
  held.clear();
  distributed::all_reduce_observers(gm, ctx);
}

}  // namespace qfx::quant::detail
