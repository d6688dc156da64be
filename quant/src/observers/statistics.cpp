// Observer statistics files keyed by a hash of the prepared graph.
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "qfx/atomic_file.h"
#include "qfx/error.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/passes.h"

namespace qfx::quant {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// (path, observer) for every observer in the model, in a stable order.
std::vector<std::pair<std::string, std::shared_ptr<ObserverBase>>> observers(fx::GraphModule& gm) {
  std::vector<std::pair<std::string, std::shared_ptr<ObserverBase>>> out;
  for (const auto& item : gm.named_modules("", /*include_self=*/false)) {
    if (auto o = std::dynamic_pointer_cast<ObserverBase>(item.value())) out.emplace_back(item.key(), o);
  }
  return out;
}

}  // namespace

std::string graph_hash(const fx::GraphModule& gm) {
  uint64_t h = fnv1a(gm.graph().python_code());
  for (const auto& kv : observers(const_cast<fx::GraphModule&>(gm))) {
    h = fnv1a(kv.first, h);
    h = fnv1a(kv.second->name() + " " + kv.second->spec().str(), h);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

void save_statistics(fx::GraphModule& gm, const std::string& path) {
  torch::serialize::OutputArchive ar;
  ar.write("qfx_graph_hash", c10::IValue(graph_hash(gm)));
  for (const auto& kv : observers(gm)) {
    for (const auto& b : kv.second->named_buffers(/*recurse=*/false)) ar.write(kv.first + "." + b.key(), b.value(), true);
  }
  write_atomic(path, [&](const std::string& tmp) { ar.save_to(tmp); });
}

void load_statistics(fx::GraphModule& gm, const std::string& path) {
  torch::serialize::InputArchive ar;
  try {
    ar.load_from(path);
  } catch (const std::exception& e) {
    throw IoError(path + ": cannot read statistics file (missing, truncated or not a qfx statistics file)");
  }
  c10::IValue hv;
  if (!ar.try_read("qfx_graph_hash", hv) || !hv.isString())
    throw IoError(path + ": not a qfx statistics file (no graph hash)");
  const std::string mine = graph_hash(gm);
  if (hv.toStringRef() != mine)
    throw DataError(path + ": statistics were recorded for another graph (hash " + hv.toStringRef() +
                    ", this model's prepared graph is " + mine + ")");
  for (const auto& kv : observers(gm)) {
    for (auto& b : kv.second->named_buffers(/*recurse=*/false)) {
      at::Tensor t = b.value();
      ar.read(kv.first + "." + b.key(), t, /*is_buffer=*/true);
    }
  }
  // FakeQuantize modules recompute their qparams from the loaded statistics.
  for (const auto& m : gm.modules(false))
    if (auto* fq = dynamic_cast<FakeQuantize*>(m.get()))
      if (fq->observer().has_data() && !fq->learnable()) fq->calculate_qparams();
}

}  // namespace qfx::quant
