// library_versions (see qfx/runtime/registry.h): oneDNN's version as loaded.
#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "qfx/runtime/registry.h"

namespace qfx::runtime {

std::vector<std::pair<std::string, std::string>> library_versions() {
  const dnnl_version_t* v = dnnl_version();
  return {{"onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch)}};
}

}  // namespace qfx::runtime
