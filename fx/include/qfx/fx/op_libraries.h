// Operator libraries for TorchScript archives that call operators outside
// libtorch (torchvision's nms / roi_align / deform_conv2d, a user's own).
#pragma once

#include <string>
#include <vector>

namespace qfx::fx {

/// Loads a shared library that registers TorchScript operators, as Python's
/// `torch.ops.load_library` does (dlopen with RTLD_NOW | RTLD_GLOBAL: its
/// TORCH_LIBRARY registrations run). Loading a path again is a no-op. Throws
/// IoError naming `path` and the loader's message if it cannot be loaded.
void load_operator_library(const std::string& path);

/// Finds and loads torchvision's operator library (torchvision::nms, roi_align,
/// deform_conv2d, ...): $QFX_TORCHVISION_LIBRARY if set, else the `_C` extension
/// of the torchvision installed beside the running libtorch (a pip-installed torch:
/// site-packages/torchvision/_C*.so next to site-packages/torch/lib), else of a
/// system one (python3-torchvision under /usr/lib/python3, /usr/local/lib/python3*).
/// The extension must be built for the running libtorch. Returns the path loaded, or ""
/// when none is installed. Throws IoError if one is found but cannot be loaded.
std::string load_torchvision_operators();

/// The libraries loaded so far (in order).
std::vector<std::string> loaded_operator_libraries();

}  // namespace qfx::fx
