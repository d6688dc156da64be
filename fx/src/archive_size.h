// Internal: the size a zip archive (a TorchScript file) unpacks to, read from its
// central directory before anything is unpacked.
#pragma once

#include <cstdint>
#include <string>

namespace qfx::fx::detail {

/// Sum of the uncompressed sizes of every entry of the zip archive at `path`, in
/// bytes, from its central directory (PKWARE APPNOTE 6.3: end of central directory
/// record, ZIP64 end record and extra fields). Throws IoError naming `path` when
/// the directory cannot be found or is inconsistent with the file's size.
uint64_t zip_unpacked_size(const std::string& path);

/// The most bytes a model archive may unpack to: QFX_MAX_MODEL_BYTES when set,
/// else the memory the kernel reports available (MemAvailable), else no limit.
/// Throws ConfigError when QFX_MAX_MODEL_BYTES is not a positive integer.
uint64_t model_unpack_limit();

/// Throws IoError naming `path`, its unpacked size and the limit when the zip
/// archive at `path` unpacks to more than model_unpack_limit(); when its directory
/// cannot be read, IoError "<path>: <corrupt>: <reason>" (`corrupt` says what the
/// file failed to be, as the loader would: "cannot load TorchScript archive ...").
void check_unpacked_size(const std::string& path, const std::string& corrupt);

}  // namespace qfx::fx::detail
