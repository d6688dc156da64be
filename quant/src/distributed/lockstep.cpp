// Data-parallel calibration in lockstep (see lockstep.h).
#include "lockstep.h"

#include <ATen/ATen.h>

#include <csignal>
#include <cstdlib>
#include <limits>

#include "qfx/error.h"
#include "qfx/quant/fault_injection.h"
#include "qfx/quant/observer.h"
#include "qfx/quant/runtime_tensor.h"

namespace qfx::quant::detail {
namespace {

// One step's observations on this rank: deferred (ObserverBase::defer) or, where
// an observer cannot defer, a copy of the value. Buffers are reused across steps.
struct Step {
  struct Held {
    FakeQuantize* fq;
    at::Tensor copy;
    bool deferred;
  };
  std::vector<Held> held;
  std::vector<DeferredObservation> pending;  // by observation
  std::vector<at::Tensor> pool;              // the copies' storage, by observation
  std::function<at::Tensor(const std::string&)> gather;  // this step's all-gather, in flight
};

// What applying a gathered step needs besides the step: the ranks, the observation slots, the totals.
struct Merge {
  int world;
  int rank;
  const std::vector<FakeQuantize*>& slots;
  CalibrationResult* res;
  const std::function<void(int64_t)>& progress;
};

// Every observation of a run, in the order a run makes them (the same on every rank); throws
// ConfigError for an observer whose statistics depend on the order of batches.
size_t observations_per_run(const std::map<std::string, std::vector<FakeQuantize*>>& observers) {
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
  return per_run;
}

// Copies `t` into observation k's reused buffer of `st` and widens [lo, hi] to its range.
at::Tensor hold_copy(Step& st, size_t k, const at::Tensor& t, float& lo, float& hi) {
  if (st.pool.size() <= k) st.pool.resize(k + 1);
  at::Tensor& buf = st.pool[k];
  if (!buf.defined() || buf.sizes() != t.sizes()) buf = at::empty_like(t, at::MemoryFormat::Contiguous);
  at::Tensor copy = buf.copy_(t);
  if (t.numel() > 0) {
    auto [l, h] = at::aminmax(t);
    lo = l.item<float>(), hi = h.item<float>();
  }
  return copy;
}

// Holds one tapped value for each of its fake-quantizers in `st` (deferred where the observer can,
// else copied) and appends each one's lo, hi to `ranges` (+inf, -inf where there is none).
void hold_observations(Step& st, std::vector<float>& ranges, const std::vector<FakeQuantize*>& fqs, const at::Tensor& t) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (FakeQuantize* fq : fqs) {
    const size_t k = st.held.size();
    float lo = kInf, hi = -kInf;
    bool deferred = false;
    if (fq->observer_enabled()) {
      if (st.pending.size() <= k) st.pending.resize(k + 1);
      deferred = fq->observer().defer(t, &st.pending[k]);
      if (deferred && !st.pending[k].empty) lo = st.pending[k].lo, hi = st.pending[k].hi;
    }
    at::Tensor copy;
    if (!deferred) copy = hold_copy(st, k, t, lo, hi);
    st.held.push_back({fq, copy, deferred});
    ranges.insert(ranges.end(), {lo, hi});
  }
}

// Counts the ranks that had a batch in a gathered step; throws ConfigError when some rank had none
// in the first step.
int active_ranks(const at::TensorAccessor<double, 2>& a, int world, int64_t index) {
  int active = 0;
  for (int r = 0; r < world; ++r) active += a[r][0] != 0;
  if (active != 0 && index == 0 && active < world)
    throw ConfigError("distributed calibration: " + std::to_string(active) + " of " + std::to_string(world) +
                      " ranks have a calibration batch; give every rank at least one (more calibration.num_samples, a smaller "
                      "calibration.batch_size, or fewer processes)");
  return active;
}

// Commits this rank's own observations of `s` (or feeds the copies), in observation order.
void commit_own(Step& s) {
  for (size_t k = 0; k < s.held.size(); ++k) {
    Step::Held& h = s.held[k];
    if (!h.deferred) {
      h.fq->forward(h.copy);
      continue;
    }
    h.fq->observer().commit(s.pending[k]);
    h.fq->set_qparams_stale(true);
  }
}

// Replays rank r's gathered ranges onto the observation slots.
void replay_rank(const at::TensorAccessor<double, 2>& a, int r, const std::vector<FakeQuantize*>& slots) {
  for (size_t k = 0; k < slots.size(); ++k) {
    const float lo = static_cast<float>(a[r][static_cast<int64_t>(2 + 2 * k)]);
    const float hi = static_cast<float>(a[r][static_cast<int64_t>(3 + 2 * k)]);
    if (lo > hi || !slots[k]->observer_enabled()) continue;  // an empty tensor, or an observer that is off
    slots[k]->observer().replay_range(lo, hi);
  }
}

// Applies step `index` (held in `s`) given every rank's row: in rank order, this
// rank's own observations are committed (or its copies fed), the others' ranges
// replayed. Returns false once no rank had a batch.
bool apply_step(Step& s, int64_t index, const Merge& m) {
  const at::Tensor all = s.gather("calibration step " + std::to_string(index));
  const auto a = all.accessor<double, 2>();
  if (active_ranks(a, m.world, index) == 0) return false;
  for (int r = 0; r < m.world; ++r) {
    if (a[r][0] == 0) continue;
    m.res->images += static_cast<int64_t>(a[r][1]);
    ++m.res->batches;
    if (r == m.rank)
      commit_own(s);
    else
      replay_rank(a, r, m.slots);
  }
  if (m.progress) m.progress(m.res->images);
  return true;
}

// Runs one batch (its taps fill `st`), learns the observation slots from the first run and checks
// every later run makes the same number of observations.
void run_observed(const std::vector<at::Tensor>& batch, const RunBatch& run_batch, const Step& st,
                  std::vector<FakeQuantize*>& slots, size_t per_run) {
  run_batch(batch);
  if (slots.empty())
    for (const auto& h : st.held) slots.push_back(h.fq);
  if (st.held.size() != slots.size() || st.held.size() > per_run)
    throw InternalError("distributed calibration: a run made " + std::to_string(st.held.size()) + " observations, the first " +
                        std::to_string(slots.size()));
}

// This rank's row of a step: [has a batch, images, then lo, hi per observation] (doubles hold the
// floats exactly); all zeros without a batch.
at::Tensor step_row(const std::vector<at::Tensor>& batch, const std::vector<float>& ranges, size_t per_run) {
  at::Tensor row = at::zeros({static_cast<int64_t>(2 + 2 * per_run)}, at::kDouble);
  if (!batch.empty()) {
    row[0] = 1.0;
    row[1] = static_cast<double>(batch[0].size(0));
    double* r = row.data_ptr<double>();
    for (size_t i = 0; i < ranges.size(); ++i) r[2 + i] = static_cast<double>(ranges[i]);
  }
  return row;
}

}  // namespace

void calibrate_lockstep(fx::GraphModule& gm, const NextBatch& next, distributed::Context& ctx,
                        const std::map<std::string, std::vector<FakeQuantize*>>& observers, const TapAll& tap_all,
                        const RunBatch& run_batch, const std::function<void(int64_t)>& progress, CalibrationResult* res) {
  const size_t per_run = observations_per_run(observers);
  std::vector<FakeQuantize*> slots;  // learned from the first run
  // Two steps are in flight: step s runs (its observations deferred against the
  // grids as they stand) while step s - 1's all-gather completes; step s - 1 is
  // then applied. A deferred observation commits exactly onto any later grid, so
  // no rank waits for the gather before running its next batch.
  Step steps[2];
  std::vector<float> ranges;
  Step* st = nullptr;
  tap_all([&](const std::string& name, const stats::FloatView& value) {
    const at::Tensor t = at::from_blob(const_cast<float*>(value.data), value.shape, at::TensorOptions().dtype(at::kFloat));
    hold_observations(*st, ranges, observers.at(name), t);
  });
  const Merge merge{ctx.world_size(), ctx.rank(), slots, res, progress};
  for (int64_t step = 0;; ++step) {
    testing::fault_point(testing::FaultPoint::kCalibrationStep, merge.rank, step);
    st = &steps[step % 2];
    st->held.clear();
    ranges.clear();
    std::vector<at::Tensor> batch = next();
    if (!batch.empty()) run_observed(batch, run_batch, *st, slots, per_run);
    st->gather = ctx.all_gather_start(step_row(batch, ranges, per_run));
    if (step == 0) continue;
    if (!apply_step(steps[(step - 1) % 2], step - 1, merge)) {
      // Every rank is past its data and started this step's (empty) gather too.
      st->gather("calibration end");
      break;
    }
  }
  distributed::all_reduce_observers(gm, ctx);
}

}  // namespace qfx::quant::detail
