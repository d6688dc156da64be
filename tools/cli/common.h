// Helpers shared by the qfx ptq and qat commands: progress display, staged output
// files, JSON, and tensor conversions between ATen and the runtime.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "qfx/error.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/runtime_tensor.h"
#include "qfx/runtime/model.h"

namespace qfx::cli {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
inline double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

/// Progress on a terminal (one rewritten line), plain lines otherwise.
class Progress {
 public:
  Progress(std::string what, int64_t total) : what_(std::move(what)), total_(total), tty_(isatty(2)), t0_(Clock::now()) {}
  /// `done` of `total` items; `extra` is appended ("loss 0.41  acc 86.2%").
  void update(int64_t done, const std::string& extra = "") {
    const double s = secs(t0_), rate = s > 0 ? static_cast<double>(done) / s : 0.0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
    if (tty_) {
      const int width = 30, fill = static_cast<int>(width * done / std::max<int64_t>(total_, 1));
      std::fprintf(stderr, "\r%s [%s%s] %lld/%lld  %.0f img/s  ETA %.0fs  %s ", what_.c_str(), std::string(fill, '#').c_str(),
                   std::string(width - fill, '.').c_str(), static_cast<long long>(done), static_cast<long long>(total_), rate, eta,
                   extra.c_str());
      if (done >= total_) std::fprintf(stderr, "\n");
    } else if (done >= total_ || secs(last_) > 5.0) {
      std::fprintf(stderr, "%s: %lld/%lld images, %.0f img/s%s%s\n", what_.c_str(), static_cast<long long>(done),
                   static_cast<long long>(total_), rate, extra.empty() ? "" : ", ", extra.c_str());
      last_ = Clock::now();
    }
  }

 private:
  std::string what_;
  int64_t total_;
  bool tty_;
  Clock::time_point t0_, last_ = Clock::now();
};

/// Output files are written under temporary names and renamed together at the end;
/// on failure the temporaries are removed, so OUT never holds a partial set.
class Staging {
 public:
  explicit Staging(const std::string& dir) : dir_(dir) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    const std::string probe = (fs::path(dir_) / ".qfx_write_test").string();
    std::ofstream f(probe);
    if (ec || !f) throw IoError(dir_ + ": output directory cannot be created or written");
    f.close();
    fs::remove(probe, ec);
  }
  ~Staging() {
    std::error_code ec;
    for (const auto& kv : files_) fs::remove(kv.second, ec);
  }
  std::string path(const std::string& name) {
    const std::string tmp = (fs::path(dir_) / (name + ".partial")).string();
    files_[name] = tmp;
    return tmp;
  }
  void commit() {
    for (const auto& kv : files_) {
      std::error_code ec;
      fs::rename(kv.second, fs::path(dir_) / kv.first, ec);
      if (ec) throw IoError((fs::path(dir_) / kv.first).string() + ": cannot rename into place: " + ec.message());
    }
    files_.clear();
  }
  std::string final_path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

 private:
  std::string dir_;
  std::map<std::string, std::string> files_;
};

inline void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path);
  if (!f) throw IoError(path + ": cannot write");
  f << j.dump(2) << "\n";
  if (!f) throw IoError(path + ": write failed");
}

/// A runtime tensor over an ATen tensor's memory (no copy).
inline runtime::Tensor wrap(const at::Tensor& t) { return quant::runtime_view(t); }

/// A float runtime tensor copied into ATen.
inline at::Tensor to_aten(const runtime::Tensor& t) { return quant::aten_view(t).clone(); }


/// convert_fx for the CLI's one-input models: the graph input is named "input", the
/// output "output"; `input_shape` as model.input_shape.
inline quant::ConvertResult convert_model(fx::GraphModule& gm, const std::string& path,
                                          const std::vector<int64_t>& input_shape) {
  quant::ConvertOptions o;
  o.input_shapes = {input_shape};
  o.input_names = {"input"};
  return quant::convert_fx(gm, path, o);
}

}  // namespace qfx::cli
