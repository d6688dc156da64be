// What the exported-program fuzz target does with one input, shared with the test
// that replays its findings: the input is a list of archive records, written as
// a PT2 zip archive (libtorch's PyTorchStreamWriter, as torch.export.save writes
// it), read by load_exported_program and run once on zeros of its input shapes.
#pragma once

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qfx/fx/exported_program.h"

namespace qfx::fuzz {

/// The records of a fuzz input: a sequence of [u8 name length][name][u32 little-endian
/// content length][content]; a record cut short by the end of the input keeps what
/// is there. Names are the archive's record names ("models/model.json",
/// "data/weights/weight_0", ...).
inline std::vector<std::pair<std::string, std::string>> pt2_records(const uint8_t* data, size_t size) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t p = 0;
  while (p < size) {
    const size_t nl = data[p++];
    std::string name(reinterpret_cast<const char*>(data + p), std::min(nl, size - p));
    p += name.size();
    uint32_t len = 0;
    for (int i = 0; i < 4 && p < size; ++i) len |= static_cast<uint32_t>(data[p++]) << (8 * i);
    const size_t n = std::min<size_t>(len, size - p);
    out.emplace_back(std::move(name), std::string(reinterpret_cast<const char*>(data + p), n));
    p += n;
  }
  return out;
}

/// Writes `records` as a PT2 archive at `path` (duplicate and empty names dropped,
/// as a zip cannot hold them).
inline void write_pt2(const std::string& path, const std::vector<std::pair<std::string, std::string>>& records) {
  caffe2::serialize::PyTorchStreamWriter w(path);
  std::vector<std::string> seen;
  for (const auto& [name, content] : records) {
    if (name.empty() || std::find(seen.begin(), seen.end(), name) != seen.end() || name == ".data/version" ||
        name == "byteorder" || name == "version" || name == ".data/serialization_id")
      continue;
    seen.push_back(name);
    w.writeRecord(name, content.data(), content.size());
  }
  w.writeEndOfFile();
}

/// Loads the exported program at `path` and runs it once on zeros of its traced
/// input shapes (symbolic sizes as 1; inputs past 2^24 elements are not run: the
/// harness's limit, not qfx's). Throws what the reader and the Interpreter throw.
inline void load_and_run_pt2(const std::string& path) {
  auto gm = qfx::fx::load_exported_program(path);
  std::vector<c10::IValue> inputs;
  for (const auto* p : gm->graph().placeholders()) {
    std::vector<int64_t> shape = p->meta().at("traced_shape").toIntVector();
    int64_t n = 1;
    for (auto& d : shape) {
      d = d < 0 ? 1 : d;
      n = d > 0 && n > (int64_t{1} << 24) / d ? (int64_t{1} << 25) : n * d;
    }
    if (n > (int64_t{1} << 24)) return;
    inputs.emplace_back(at::zeros(shape));
  }
  at::NoGradGuard ng;
  gm->forward(inputs);
}

}  // namespace qfx::fuzz
