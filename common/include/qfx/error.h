// qfx error hierarchy, shared by every layer (header only, no libtorch).
#pragma once

#include <stdexcept>
#include <string>

namespace qfx {

/// Base class of every error qfx raises on purpose. `what()` is a complete,
/// one-line (or few-line) message for a user: it names the file, node, YAML
/// location or tensor involved. The CLI maps each subclass to its own exit code
/// (see `exit_code()`), so scripts can tell failures apart.
class Error : public std::runtime_error {
 public:
  /// @param message full human-readable message, context included.
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  /// Process exit code the `qfx` CLI uses for this error kind (2..8, 10 and 11;
  /// 1 is an internal error, 9 a failed reference check).
  virtual int exit_code() const noexcept { return 2; }
};

/// Bad configuration: YAML syntax, unknown key, wrong type or value, a qconfig the
/// backend cannot honour. Message carries `file:line:column` when it comes from YAML.
class ConfigError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return 3; }
};

/// The tracer met something the graph cannot express (data-dependent control flow,
/// module mutation, unsupported construct). Message names the source line, the
/// module path, and the wrap entry that would keep the construct whole.
class TraceError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return 4; }
};

/// An operator outside the supported set (runtime or export); names node and op.
class UnsupportedOpError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return 5; }
};

/// Bad data: NaN/Inf in observed tensors, wrong shapes or dtypes, inconsistent
/// label files. Names the tensor or file.
class DataError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return 6; }
};

/// A file that cannot be read, parsed or written: missing, truncated, not the
/// expected format, output directory not writable. Names the path.
class IoError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return 7; }
};

/// Running a graph or model failed inside an op (libtorch or a kernel raised an
/// error for these inputs: shapes that do not fit, a wrapped call that threw).
/// Names the node, its op and the original message.
class ExecutionError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return 8; }
};

/// A multi-process run failed: a rank died, hung past the timeout, or could not
/// join the process group. Names the rank (when known) and the collective.
class DistributedError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return 10; }
};

/// A library call got an argument outside its documented contract: an empty or
/// unknown module path, a count that must be positive, alpha outside (0, 1), a
/// pattern that does not compile or matches nothing. Names the function and the
/// argument. (A value read from a config file is reported as a ConfigError
/// naming its key.)
class ArgumentError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return 11; }
};

/// A broken invariant inside qfx: a bug, not bad input (a node erased while still
/// used, a graph with two outputs, an observer asked to commit what it never
/// held). Names the function and the state found. The CLI reports it as an
/// internal error.
class InternalError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return 1; }
};

}  // namespace qfx
