// libtorch's CUDA library, loaded on demand (qfx/quant/torch_device.h).
#include "qfx/quant/torch_device.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <dlfcn.h>
#include <torch/cuda.h>

#include <filesystem>
#include <mutex>

#include "qfx/error.h"
#include "qfx/runtime/cuda.h"

namespace qfx::quant {
namespace {

// The folder of the libtorch_cpu this process runs with.
std::string libtorch_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&at::globalContext), &info) == 0 || info.dli_fname == nullptr) return "";
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

// Loads libtorch_cuda.so beside libtorch_cpu.so; "" on success, else why not.
std::string load_torch_cuda() {
  const std::string dir = libtorch_folder();
  if (dir.empty()) return "cannot tell which libtorch this process runs with";
  const std::string lib = (std::filesystem::path(dir) / "libtorch_cuda.so").string();
  if (!std::filesystem::exists(lib)) return "the libtorch in " + dir + " is a CPU-only build (it has no libtorch_cuda.so)";
  if (dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char* e = dlerror();
    return "libtorch's CUDA library does not load: " + std::string(e ? e : lib);
  }
  return "";
}

const std::string& load_reason() {
  static std::once_flag once;
  static std::string reason;
  std::call_once(once, [] { reason = load_torch_cuda(); });
  return reason;
}

}  // namespace

c10::Device parse_torch_device(const std::string& value, const std::string& key) {
  const std::string idx = value.rfind("cuda:", 0) == 0 ? value.substr(5) : "";
  const bool index_ok = !idx.empty() && idx.size() <= 4 && idx.find_first_not_of("0123456789") == std::string::npos;
  if (value != "cpu" && value != "cuda" && !index_ok)
    throw ConfigError(key + " must be cpu, cuda or cuda:N, got '" + value + "'");
  return c10::Device(value);
}

void use_full_fp32_on_gpu() {
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
}

bool torch_cuda_kernels_loaded() {
  if (!load_reason().empty()) return false;
  const auto op = c10::Dispatcher::singleton().findSchema({"aten::add", "Tensor"});
  return op.has_value() && op->hasKernelForDispatchKey(c10::DispatchKey::CUDA);
}

std::string torch_device_unavailable_reason(const c10::Device& device) {
  if (device.is_cpu()) return "";
  if (!device.is_cuda()) return "libtorch device '" + device.str() + "' is not supported for training";
  if (const std::string& r = load_reason(); !r.empty()) return r;
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (count == 0) {
    const std::string why = runtime::cuda_unavailable_reason();
    return "libtorch sees no CUDA device" + (why.empty() ? std::string() : " (" + why + ")");
  }
  if (device.has_index() && device.index() >= count)
    return "libtorch sees " + std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") + ", so there is no " +
           device.str();
  return "";
}

}  // namespace qfx::quant
