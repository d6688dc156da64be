// libFuzzer target: the ONNX loader (parse, QDQ matching, planning) and one run
// on zero inputs of the declared shapes (dynamic dimensions as 1).
#include <cstdint>
#include <string>

#include "qfx/error.h"
#include "qfx/runtime/model.h"

using namespace qfx::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    Model m = Model::load_from_string(bytes, ModelOptions{"onednn"}, "<fuzz input>");
    std::map<std::string, Tensor> in;
    int64_t total = 0;
    for (const auto& info : m.inputs()) {
      std::vector<int64_t> shape = info.shape;
      int64_t n = 1;
      for (auto& d : shape) {
        d = d < 0 ? 1 : d;
        n *= d > 0 ? d : 1;
        if (n > (1 << 20)) return 0;  // a huge input is not what this target explores
      }
      total += n;
      in.emplace(info.name, Tensor(shape, info.dtype));
    }
    if (total > (1 << 20)) return 0;
    for (auto& kv : in) std::fill(static_cast<uint8_t*>(kv.second.raw()), static_cast<uint8_t*>(kv.second.raw()) + kv.second.nbytes(), 0);
    m.run(in);
  } catch (const qfx::Error&) {
  }
  return 0;
}
