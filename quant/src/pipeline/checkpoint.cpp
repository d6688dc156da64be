// QAT checkpoints (libtorch serialize archives).
#include "qfx/quant/checkpoint.h"

#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>

#include "qfx/atomic_file.h"
#include "qfx/error.h"
#include "qfx/quant/passes.h"

namespace qfx::quant {
namespace {

// The device of the model's parameters (the host for a model without any).
torch::Device model_device(fx::GraphModule& model) {
  const auto ps = model.parameters();
  return ps.empty() ? torch::Device(torch::kCPU) : ps.front().device();
}

// Moves the optimizer's per-parameter state (momentum buffers, Adam moments) to `d`.
void move_optimizer_state(torch::optim::Optimizer& opt, torch::Device d) {
  auto move = [d](const at::Tensor& t) { return t.defined() ? t.to(d) : t; };
  for (auto& kv : opt.state()) {
    if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(kv.second.get())) s->momentum_buffer(move(s->momentum_buffer()));
    if (auto* s = dynamic_cast<torch::optim::AdamParamState*>(kv.second.get())) {
      s->exp_avg(move(s->exp_avg()));
      s->exp_avg_sq(move(s->exp_avg_sq()));
      s->max_exp_avg_sq(move(s->max_exp_avg_sq()));
    }
  }
}

}  // namespace

void save_qat_checkpoint(const std::string& path, fx::GraphModule& model, torch::optim::Optimizer& optimizer,
                         int64_t step) {
  torch::serialize::OutputArchive root, m, o;
  model.save(m);
  optimizer.save(o);
  root.write("model", m);
  root.write("optimizer", o);
  root.write("step", c10::IValue(step));
  root.write("graph_hash", c10::IValue(graph_hash(model)));
  write_atomic(path, [&](const std::string& tmp) {
    try {
      root.save_to(tmp);
    } catch (const c10::Error& e) {
      throw IoError(path + ": cannot write the checkpoint (" + e.what_without_backtrace() + ")");
    }
  });
}

int64_t load_qat_checkpoint(const std::string& path, fx::GraphModule& model, torch::optim::Optimizer& optimizer) {
  torch::serialize::InputArchive root, m, o;
  try {
    root.load_from(path, torch::Device(torch::kCPU));  // a checkpoint saved on a GPU loads anywhere
  } catch (const c10::Error& e) {
    throw IoError(path + ": cannot read the checkpoint (missing, truncated or not a qfx QAT checkpoint)");
  }
  c10::IValue hash, step;
  if (!root.try_read("graph_hash", hash) || !root.try_read("step", step) || !root.try_read("model", m) ||
      !root.try_read("optimizer", o))
    throw IoError(path + ": not a qfx QAT checkpoint");
  if (!hash.isString() || !step.isInt())
    throw IoError(path + ": not a qfx QAT checkpoint ('graph_hash' must be a string and 'step' an integer, found " +
                  hash.tagKind() + " and " + step.tagKind() + ")");
  if (hash.toStringRef() != graph_hash(model))
    throw DataError(path + ": the checkpoint belongs to another prepared graph (hash " + hash.toStringRef() +
                    ", this model " + graph_hash(model) + ")");
  const torch::Device device = model_device(model);
  try {
    if (!device.is_cpu()) model.to(torch::Device(torch::kCPU));  // the archive's tensors are on the host
    model.load(m);
    optimizer.load(o);
    if (!device.is_cpu()) {  // back where the model was
      model.to(device);
      move_optimizer_state(optimizer, device);
    }
  } catch (const c10::Error& e) {
    throw IoError(path + ": the checkpoint's parameters or optimizer state do not fit this model: " +
                  e.what_without_backtrace());
  }
  return step.toInt();
}

}  // namespace qfx::quant
