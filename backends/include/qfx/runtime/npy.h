// NumPy .npy files (format versions 1.0-3.0), the runtime's file format for tensors.
// Spec: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#pragma once

#include <string>

#include "qfx/runtime/tensor.h"

namespace qfx::runtime {

/// Reads a C-ordered, little-endian .npy file of dtype float32, int8, uint8, int32,
/// int64 or bool. Throws `qfx::IoError` naming `path` if it is missing, truncated,
/// not an .npy file, Fortran-ordered, big-endian or of another dtype.
Tensor load_npy(const std::string& path);

/// Writes `t` as a version 1.0 .npy file. Writes to `path + ".tmp"` and renames,
/// so a failure never leaves a half-written file. Throws `qfx::IoError`.
void save_npy(const std::string& path, const Tensor& t);

}  // namespace qfx::runtime
