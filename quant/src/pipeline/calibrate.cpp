// calibrate: the float graph on the runtime, its observers fed by the runtime's taps.
#include "qfx/quant/calibrate.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <map>
#include <optional>

#include "qfx/error.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/lowered_model.h"
#include "qfx/quant/op_names.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/distributed.h"
#include "../distributed/lockstep.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/runtime_tensor.h"
#include "qfx/quant/torch_device.h"
#include "qfx/runtime/cuda.h"
#include "qfx/runtime/model.h"
#include "qfx/stats/statistic.h"

namespace qfx::quant {
NextBatch batches(Dataset& data, int64_t batch_size, int rank, int world) {
  auto pos = std::make_shared<int64_t>(batch_size * rank);
  const int64_t stride = batch_size * std::max(world, 1);
  return [&data, batch_size, stride, pos]() -> std::vector<at::Tensor> {
    if (*pos >= data.size()) return {};
    std::vector<at::Tensor> b = data.batch_inputs(*pos, std::min(*pos + batch_size, data.size()));
    *pos += stride;
    return b;
  };
}

namespace {
using Clock = std::chrono::steady_clock;

// Weight observers: the deployed (batch-norm folded) weights, once (they do not change
// with data); and the FakeQuantize of a parameter that only recurrent layers read (their
// W and R, which the runtime's calibration pass does not watch).
void observe_weights(fx::GraphModule& gm) {
  for (const auto& item : gm.named_modules("", /*include_self=*/false)) {
    auto* f = dynamic_cast<FusedConvLinear*>(item.value().get());
    if (!f || !f->weight_fake_quant() || !f->weight_fake_quant()->observer_enabled()) continue;
    f->weight_fake_quant()->forward(f->folded_weight_bias().first);
  }
  for (const fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::kCallModule || n->args().empty() || !n->args()[0].is_node() ||
        n->args()[0].node->op() != fx::Opcode::kGetAttr || !read_by_recurrent_only(*n, gm))
      continue;
    auto fq = std::dynamic_pointer_cast<FakeQuantize>(gm.get_submodule(n->target()));
    if (fq && fq->observer_enabled()) fq->forward(gm.get_attr(n->args()[0].node->target()));
  }
}

using Observers = std::map<std::string, std::vector<FakeQuantize*>>;

// Which enabled FakeQuantize modules observe each value of the lowered model.
Observers observers_of(fx::GraphModule& gm, const LoweredModel& lowered) {
  Observers observers;
  for (const auto& o : lowered.observed()) {
    auto* fq = dynamic_cast<FakeQuantize*>(gm.get_submodule(o.module).get());
    if (fq && fq->observer_enabled()) observers[o.tensor].push_back(fq);
  }
  return observers;
}

// How the taps hand values to the observers: as stored (channels last between
// convolutions, no reorder), except where a Softmax input's row maxima need the
// logical layout, or, with `aten_views` (distributed lockstep, which views values as
// ATen tensors of their logical shape), a per-channel observer does.
runtime::Model::WatchLayout tap_layout(const Observers& observers, bool aten_views) {
  for (const auto& kv : observers)
    for (FakeQuantize* fq : kv.second)
      if (fq->softmax_dim() || (aten_views && fq->observer().spec().per_channel)) return runtime::Model::WatchLayout::kPlain;
  return runtime::Model::WatchLayout::kAsStored;
}

// Removes a model's taps when the data loop ends, however it ends.
struct TapsCleared {
  runtime::Model& model;
  ~TapsCleared() { model.clear_taps(); }
};

// The data loop's end: its time, and no samples is an error (observers that saw
// nothing would give scale 1 and zero point 0: a model that looks calibrated and is not).
CalibrationResult finish(CalibrationResult res, Clock::time_point t0) {
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (res.images == 0)
    throw DataError("calibration saw no samples (the calibration data is empty): nothing to compute qparams from");
  return res;
}

// The prepared model's own forward on libtorch (a graph the runtime cannot run).
CalibrationResult calibrate_libtorch(fx::GraphModule& gm, const NextBatch& next, const CalibrateOptions& options,
                                     CalibrationResult res) {
  const auto t0 = Clock::now();
  res.engine = "libtorch";
  for (auto batch = next(); !batch.empty(); batch = next()) {
    std::vector<c10::IValue> in(batch.begin(), batch.end());
    gm.forward(std::move(in));
    res.images += batch[0].size(0);
    ++res.batches;
    if (options.progress) options.progress(res.images);
  }
  return finish(std::move(res), t0);
}

// Returns a module to the host when it leaves scope (also on an error).
struct BackToHost {
  fx::GraphModule& gm;
  ~BackToHost() {
    try {
      gm.to(c10::Device(c10::kCPU));
    } catch (...) {  // a failed device: its error is already on its way out
    }
  }
};

// The prepared model's own forward on libtorch on `options.device` (a CUDA GPU).
CalibrationResult calibrate_on_device(fx::GraphModule& gm, const NextBatch& next, const CalibrateOptions& options) {
  const c10::Device device = parse_torch_device(options.device, "calibration.device");
  if (const std::string why = torch_device_unavailable_reason(device); !why.empty())
    throw ConfigError("calibration.device: " + options.device + ", but " + why);
  if (options.distributed && options.distributed->active())
    throw ConfigError("calibration.device: " + options.device + " calibrates in one process; data-parallel calibration runs on the CPU");
  at::NoGradGuard ng;
  CalibrationResult res;
  res.threads = at::get_num_threads();
  observe_weights(gm);  // on the host, once
  // Histograms count each tensor in place, where qfx's own CUDA kernels can run.
  if (runtime::cuda_unavailable_reason().empty())
    for (const auto& item : gm.named_modules("", /*include_self=*/false))
      if (auto* fq = dynamic_cast<FakeQuantize*>(item.value().get()))
        if (auto* h = dynamic_cast<HistogramObserver*>(&fq->observer())) h->set_count_on_gpu(true);
  use_full_fp32_on_gpu();
  gm.to(device);
  BackToHost back{gm};
  const NextBatch on_device = [&next, device]() {
    std::vector<at::Tensor> b = next();
    for (at::Tensor& t : b) t = t.to(device);
    return b;
  };
  res = calibrate_libtorch(gm, on_device, options, std::move(res));
  res.engine = "libtorch:" + device.str();
  return res;
}

}  // namespace

CalibrationResult calibrate(fx::GraphModule& gm, const NextBatch& next, const CalibrateOptions& options) {
  if (options.device != "cpu") return calibrate_on_device(gm, next, options);
  std::optional<LoweredModel> lowered;
  try {
    lowered.emplace(gm, LowerOptions{options.backend, options.input_shapes, {}});
  } catch (const UnsupportedOpError& e) {
    if (!options.allow_libtorch_fallback) throw;
    if (options.distributed && options.distributed->active())
      throw ConfigError("distributed calibration runs on the runtime, but this model falls back to libtorch (" +
                        std::string(e.what()) + "): calibrate it in one process");
    CalibrationResult res;
    res.threads = at::get_num_threads();
    res.fallback_reason = e.what();
    at::NoGradGuard ng;
    observe_weights(gm);
    return calibrate_libtorch(gm, next, options, std::move(res));
  }
  return calibrate(gm, *lowered, next, options);
}

CalibrationResult calibrate(fx::GraphModule& gm, LoweredModel& lowered, const NextBatch& next, const CalibrateOptions& options) {
  if (options.device != "cpu") return calibrate_on_device(gm, next, options);
  at::NoGradGuard ng;
  CalibrationResult res;
  res.threads = at::get_num_threads();
  observe_weights(gm);
  distributed::Context* dist = options.distributed && options.distributed->active() ? options.distributed : nullptr;
  Observers observers = observers_of(gm, lowered);
  res.observed_tensors = static_cast<int>(observers.size());
  const auto layout = tap_layout(observers, /*aten_views=*/false);
  const auto lockstep_layout = tap_layout(observers, /*aten_views=*/true);
  runtime::Model& model = lowered.model();
  // A parameter observed as an activation (ViT's position embedding added to the
  // tokens) is a constant of the float graph: observed once here, as every batch
  // would show it the same values; the taps observe the computed values.
  std::vector<std::string> watch;
  for (auto it = observers.begin(); it != observers.end();) {
    const runtime::Tensor* c = model.constant(it->first);
    if (!c) {
      watch.push_back(it->first);
      ++it;
      continue;
    }
    if (c->dtype() == runtime::DType::kFloat32)
      for (FakeQuantize* fq : it->second) fq->forward(aten_view(*c).clone());
    it = observers.erase(it);
  }
  res.engine = "runtime:" + options.backend;
  const auto& inputs = model.inputs();
  auto run_batch = [&](const std::vector<at::Tensor>& batch) {
    if (batch.size() != inputs.size())
      throw DataError("calibration batch has " + std::to_string(batch.size()) + " tensors; the model has " +
                      std::to_string(inputs.size()) + " inputs");
    std::map<std::string, runtime::Tensor> in;
    for (size_t i = 0; i < batch.size(); ++i) in[inputs[i].name] = runtime_view(batch[i]);
    model.run(in);  // the taps observe
  };
  // A tap on every observed value, calling `cb` with its name and value.
  auto tap_all = [&](const std::function<void(const std::string&, const stats::FloatView&)>& cb, runtime::Model::WatchLayout l) {
    model.set_taps(
        watch,
        [cb](const std::string& name) {
          return std::make_shared<stats::CallbackStatistic>([cb, name](const stats::FloatView& v) { cb(name, v); });
        },
        l);
  };
  TapsCleared cleared{model};
  // Ranks reach this point at different times (loading, tracing): the data loop's
  // clock starts when all are here, so `seconds` measures calibration, not start-up skew.
  if (dist) dist->barrier("calibration start");
  const auto t0 = Clock::now();
  if (dist) {
    detail::calibrate_lockstep(gm, next, *dist, observers, [&](const auto& cb) { tap_all(cb, lockstep_layout); }, run_batch,
                               options.progress, &res);
    return finish(std::move(res), t0);
  }
  tap_all(
      [&](const std::string& name, const stats::FloatView& v) {
        for (FakeQuantize* fq : observers.at(name)) fq->observe(v);
      },
      layout);
  for (auto batch = next(); !batch.empty(); batch = next()) {
    run_batch(batch);
    res.images += batch[0].size(0);
    ++res.batches;
    if (options.progress) options.progress(res.images);
  }
  return finish(std::move(res), t0);
}

}  // namespace qfx::quant
