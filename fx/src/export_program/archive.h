// Internal: the PT2 archive torch.export.save writes, read into JSON and tensors.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>

namespace qfx::fx::detail {

/// An exported program's archive, read.
struct ExportedArchive {
  std::string path;                            ///< the file, for messages
  nlohmann::json model;                        ///< models/<name>.json
  std::map<std::string, at::Tensor> weights;   ///< parameters and buffers by dotted name
  std::map<std::string, at::Tensor> constants; ///< lifted tensor constants by name
};

/// True for an archive record that holds a serialized program ("models/<name>.json").
bool is_model_record(const std::string& record);

/// Reads `path` (see load_exported_program for the errors); the program's JSON only
/// (no weights or constants) when `with_tensors` is false.
ExportedArchive read_exported_archive(const std::string& path, bool with_tensors = true);

/// The ATen dtype of a serialized ScalarType code (torch/_export/serde/schema.py).
/// Throws IoError naming `what` for a code this build cannot hold.
c10::ScalarType scalar_type_of(int64_t code, const std::string& what);

/// A SymInt or int field ({"as_int": n} or {"as_expr": ...}): the value, or -1
/// for a symbolic one.
int64_t static_int(const nlohmann::json& j);

}  // namespace qfx::fx::detail
