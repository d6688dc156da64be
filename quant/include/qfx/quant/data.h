// Dataset readers used by calibration, evaluation and training.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace qfx::quant {

/// Reads an IDX file (the MNIST / Fashion-MNIST format, LeCun et al.; gzip
/// compressed or plain): ubyte images `[N, rows, cols]` or labels `[N]`, returned
/// as uint8 tensors of the file's shape. Throws IoError naming `path` if it is
/// missing, truncated, or not IDX ubyte data.
at::Tensor read_idx(const std::string& path);

/// Fashion-MNIST (or MNIST) images as float [N, 1, 28, 28], scaled to [0, 1] and
/// normalised with `mean`/`std`; at most `limit` images (0: all).
at::Tensor load_idx_images(const std::string& path, int64_t limit = 0, double mean = 0.0, double std = 1.0);
/// Labels as int64 [N]; at most `limit` (0: all).
at::Tensor load_idx_labels(const std::string& path, int64_t limit = 0);

/// Labels from the npy file at `path`: int64 or int32 [count], returned as int64
/// [count]. Throws IoError for an unreadable file, DataError naming `path` for
/// another dtype or rank, or a count other than `count` (the number of samples in
/// `samples`, named in the message).
at::Tensor npy_labels(const std::string& path, int64_t count, const std::string& samples);

/// The folder of Debian's dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist),
/// or the QFX_FASHION_MNIST environment variable when set.
std::string fashion_mnist_dir();

}  // namespace qfx::quant
