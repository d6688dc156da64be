// QAT checkpoints (libtorch serialize archives).
#include "qfx/quant/checkpoint.h"

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>

#include "qfx/atomic_file.h"
#include "qfx/error.h"
#include "qfx/quant/passes.h"

namespace qfx::quant {

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
    root.load_from(path);
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
  try {
    model.load(m);
    optimizer.load(o);
  } catch (const c10::Error& e) {
    throw IoError(path + ": the checkpoint's parameters or optimizer state do not fit this model: " +
                  e.what_without_backtrace());
  }
  return step.toInt();
}

}  // namespace qfx::quant
