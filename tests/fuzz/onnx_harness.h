// What the ONNX fuzz target does with one input, shared with the regression test
// that replays its findings (tests/backends/runtime_test.cpp), so both run the same
// code: load on the onednn backend (parse, QDQ matching, planning), then one run
// on zero inputs of the declared shapes (dynamic dimensions as 1).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "qfx/runtime/model.h"

namespace qfx::fuzz {

/// Loads `bytes` as an ONNX model and runs it once on zeros. Returns false without
/// running when the inputs would exceed 2^20 elements (not what the fuzzer
/// explores), true after a run. Memory plans are limited to 1 GiB. Throws what the runtime throws (qfx::Error for
/// bad models: anything else is a finding).
inline bool load_and_run_onnx(const std::string& bytes, const std::string& what) {
  using namespace qfx::runtime;
  ModelOptions o{"onednn"};
  o.max_plan_bytes = uint64_t{1} << 30;  // within libFuzzer's memory limit (a 9.6 GB plan is not a bug)
  Model m = Model::load_from_string(bytes, o, what);
  std::map<std::string, Tensor> in;
  int64_t total = 0;
  for (const auto& info : m.inputs()) {
    std::vector<int64_t> shape = info.shape;
    int64_t n = 1;
    for (auto& d : shape) {
      d = d < 0 ? 1 : d;
      n *= d > 0 ? d : 1;
      if (n > (1 << 20)) return false;
    }
    total += n;
    if (total > (1 << 20)) return false;
    Tensor t(shape, info.dtype);
    std::fill(static_cast<uint8_t*>(t.raw()), static_cast<uint8_t*>(t.raw()) + t.nbytes(), 0);
    in.emplace(info.name, std::move(t));
  }
  m.run(in);
  return true;
}

}  // namespace qfx::fuzz
