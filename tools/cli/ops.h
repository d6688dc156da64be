// `qfx ops`: the op catalog and the runtime's op schemas, as a table.
#pragma once

#include <string>

namespace qfx::cli {

/// Prints every op of the catalog (canonical name, the aten spellings and module
/// classes that mean it, the quantization categories it may take, the lowest ONNX
/// opset it exports at, its table / integer-only forms) and, with `backend` (a name
/// or a YAML path), what that target gives it. Returns the exit status (0).
/// Throws ConfigError / IoError for a backend that does not resolve.
int print_ops(const std::string& backend);

}  // namespace qfx::cli
