// Operator libraries (see op_libraries.h).
#include "qfx/fx/op_libraries.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "qfx/error.h"

namespace qfx::fx {
namespace {

std::mutex mu;
std::vector<std::string>& loaded() {
  static std::vector<std::string> v;
  return v;
}

// The folder of the libtorch_cpu.so this process runs, or "" when it is not a
// shared library (static builds).
std::string loaded_libtorch_dir() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::filesystem::path p = info->dlpi_name ? info->dlpi_name : "";
        if (p.filename() != "libtorch_cpu.so") return 0;
        *static_cast<std::string*>(data) = p.parent_path().string();
        return 1;
      },
      &found);
  return found;
}

// The first file that `pattern` matches, or "" if none does.
std::string first_match(const std::string& pattern) {
  glob_t g{};
  std::string p;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0) p = g.gl_pathv[0];
  globfree(&g);
  return p;
}

}  // namespace

void load_operator_library(const std::string& path) {
  std::error_code ec;
  const std::string key = std::filesystem::weakly_canonical(path, ec).string();
  std::lock_guard<std::mutex> l(mu);
  for (const auto& p : loaded())
    if (p == key) return;
  if (!std::filesystem::is_regular_file(path)) throw IoError(path + ": operator library not found");
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char* why = dlerror();
    throw IoError(path + ": cannot load operator library (" + std::string(why ? why : "unknown reason") + ")");
  }
  loaded().push_back(key);
}

std::string load_torchvision_operators() {
  if (const char* env = std::getenv("QFX_TORCHVISION_LIBRARY"); env && *env) {
    load_operator_library(env);
    return env;
  }
  // A pip-installed torch keeps libtorch in site-packages/torch/lib, with torchvision
  // beside torch. Its extension links the rest of that libtorch (libtorch.so and, in
  // the CUDA wheels, libtorch_cuda.so) without a search path that finds them:
  // Python's torch loads them first, and so does this.
  if (const std::string dir = loaded_libtorch_dir(); !dir.empty()) {
    if (const std::string p = first_match(dir + "/../../torchvision/_C*.so"); !p.empty()) {
      for (const char* lib : {"libtorch.so", "libc10_cuda.so", "libtorch_cuda.so"})
        if (std::filesystem::exists(dir + "/" + lib)) load_operator_library(dir + "/" + lib);
      load_operator_library(p);
      return p;
    }
  }
  for (const char* pattern : {"/usr/lib/python3/dist-packages/torchvision/_C*.so", "/usr/local/lib/python3*/dist-packages/torchvision/_C*.so",
                              "/usr/local/lib/python3*/site-packages/torchvision/_C*.so"}) {
    if (const std::string p = first_match(pattern); !p.empty()) {
      load_operator_library(p);
      return p;
    }
  }
  return "";
}

std::vector<std::string> loaded_operator_libraries() {
  std::lock_guard<std::mutex> l(mu);
  return loaded();
}

}  // namespace qfx::fx
