// Side-by-side latency of ONNX models on several runtime backends, measured in one
// run: median and interquartile range of repeated runs, images per second, and each
// backend's speed relative to the first. Links only the runtime (no libtorch), so it
// runs where qfx's models are deployed, GPU machines included.
//   qfx_runtime_bench MODEL.onnx... [--backends onednn,cuda] [--batch 1,32] [--iters 20]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/runtime_bench.h"
#include "qfx/error.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  qfx::cli::RuntimeBenchArgs a;
  const char* usage = "usage: %s MODEL.onnx... [--backends onednn,cuda] [--batch 1,32] [--iters 20]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool has_value = i + 1 < argc;
    if (s == "--backends" && has_value) a.backends = split(argv[++i]);
    else if (s == "--batch" && has_value) {
      a.batches.clear();
      for (const auto& b : split(argv[++i])) a.batches.push_back(std::stoll(b));
    } else if (s == "--iters" && has_value) a.iters = std::max(1, std::atoi(argv[++i]));
    else if (!s.empty() && s[0] == '-') {
      std::fprintf(stderr, usage, argv[0]);
      return 2;
    } else a.models.push_back(s);
  }
  if (a.models.empty() || a.backends.empty()) {
    std::fprintf(stderr, usage, argv[0]);
    return 2;
  }
  try {
    return qfx::cli::run_runtime_bench(a);
  } catch (const qfx::Error& e) {
    std::fprintf(stderr, "qfx_runtime_bench: %s\n", e.what());
    return e.exit_code();
  }
}
