// Presentation shared by the qfx commands: a progress bar driven by the pipelines'
// hooks, and the kernel summary. No pipeline logic lives in the CLI.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "messages.h"
#include "qfx/error.h"
#include "qfx/quant/pipeline.h"
#include "qfx/runtime/registry.h"

namespace qfx::cli {

/// Runs a pipeline with the data-parallel context `world` ranks share alive. In a
/// run of several processes, a qfx::Error is reported as main() reports it and the
/// process ends at once (std::_Exit, after the pipeline's own cleanup has run),
/// without tearing down the c10d process group while the other ranks may still be
/// using theirs: such teardowns raced into c10d stack traces or an abort in a rank
/// that had already failed cleanly. One process: the error propagates as usual.
template <typename Fn>
auto run_rank(int world, Fn&& fn) -> decltype(fn()) {
  if (world <= 1) return fn();
  try {
    return fn();
  } catch (const Error& e) {
    std::fprintf(stderr, "qfx: error: %s\n", clip_message(e.what()).c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(e.exit_code());
  }
}

using Clock = std::chrono::steady_clock;
inline double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

/// Progress on a terminal (one rewritten line), plain lines otherwise.
class Progress {
 public:
  /// Stages whose name ends in "(layers)" count layers; the others images.
  Progress(std::string what, int64_t total) : what_(std::move(what)), total_(total), tty_(isatty(2)), t0_(Clock::now()) {
    const std::string tag = "(layers)";
    if (what_.size() >= tag.size() && what_.compare(what_.size() - tag.size(), tag.size(), tag) == 0) {
      unit_ = "layers";
      rate_unit_ = "layers/s";
    }
  }
  /// `done` of `total` items; `extra` is appended ("loss 0.41  acc 86.2%").
  void update(int64_t done, const std::string& extra = "") {
    // The bar is made at the first update, after the first items: the rate counts
    // the items since then (none yet on the first update: no rate shown).
    if (first_done_ < 0) first_done_ = done;
    const double s = secs(t0_);
    const double rate = s > 0 && done > first_done_ ? static_cast<double>(done - first_done_) / s : 0.0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
    // The rate of a finished stage is left to the summary line that follows it
    // (measured over the whole stage), so a run shows one rate per stage.
    char rate_text[64] = "";
    if (rate > 0 && done < total_) std::snprintf(rate_text, sizeof rate_text, "%.1f %s", rate, rate_unit_.c_str());
    if (tty_) {
      const int width = 30, fill = static_cast<int>(width * done / std::max<int64_t>(total_, 1));
      char eta_text[32] = "";
      if (done < total_) std::snprintf(eta_text, sizeof eta_text, "ETA %.0fs", eta);
      std::fprintf(stderr, "\r%s [%s%s] %lld/%lld  %s  %s  %s ", what_.c_str(), std::string(fill, '#').c_str(),
                   std::string(width - fill, '.').c_str(), static_cast<long long>(done), static_cast<long long>(total_),
                   rate_text, eta_text, extra.c_str());
      if (done >= total_) std::fprintf(stderr, "\n");
    } else if (done >= total_ || secs(last_) > 5.0) {
      std::fprintf(stderr, "%s: %lld/%lld %s%s%s%s%s\n", what_.c_str(), static_cast<long long>(done),
                   static_cast<long long>(total_), unit_.c_str(), rate_text[0] ? ", " : "", rate_text, extra.empty() ? "" : ", ",
                   extra.c_str());
      last_ = Clock::now();
    }
  }

 private:
  std::string what_;
  std::string unit_ = "images", rate_unit_ = "img/s";
  int64_t total_;
  bool tty_;
  Clock::time_point t0_, last_ = Clock::now();
  int64_t first_done_ = -1;
};

/// Pipeline hooks that draw one Progress per stage and print info lines.
class ProgressHooks {
 public:
  quant::PipelineHooks hooks() {
    quant::PipelineHooks h;
    h.progress = [this](const std::string& stage, int64_t done, int64_t total, const std::string& extra) {
      auto& p = bars_[stage];
      auto& last = done_[stage];
      if (!p || done < last) p = std::make_unique<Progress>(stage, total);  // a stage run again starts a new bar
      last = done;
      p->update(done, extra);
    };
    // Flushed at once: progress goes to stderr unbuffered, and with both redirected to
    // one file the header must still come before the progress it introduces.
    h.info = [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    };
    return h;
  }

 private:
  std::map<std::string, std::unique_ptr<Progress>> bars_;
  std::map<std::string, int64_t> done_;
};

/// "kernels on onednn: QLinearConv 12 onednn, Add 3 simd, ..." (one line).
inline void print_kernel_summary(const std::vector<runtime::KernelChoice>& report, const std::string& backend) {
  std::string line;
  for (const auto& kv : runtime::kernel_counts(report)) {
    const auto colon = kv.first.find(':');
    line += (line.empty() ? "" : ", ") + std::to_string(kv.second) + " " + kv.first.substr(0, colon) + " on " +
            kv.first.substr(colon + 1);
  }
  std::printf("int8 model on runtime backend %s: %s (per node: qfx run --explain)\n", backend.c_str(), line.c_str());
}

}  // namespace qfx::cli
