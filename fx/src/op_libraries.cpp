// Operator libraries (see op_libraries.h).
#include "qfx/fx/op_libraries.h"

#include <dlfcn.h>
#include <glob.h>

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
  for (const char* pattern : {"/usr/lib/python3/dist-packages/torchvision/_C*.so", "/usr/local/lib/python3*/dist-packages/torchvision/_C*.so",
                              "/usr/local/lib/python3*/site-packages/torchvision/_C*.so"}) {
    glob_t g{};
    if (glob(pattern, 0, nullptr, &g) == 0 && g.gl_pathc > 0) {
      const std::string p = g.gl_pathv[0];
      globfree(&g);
      load_operator_library(p);
      return p;
    }
    globfree(&g);
  }
  return "";
}

std::vector<std::string> loaded_operator_libraries() {
  std::lock_guard<std::mutex> l(mu);
  return loaded();
}

}  // namespace qfx::fx
