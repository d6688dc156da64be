// The op catalog: one record per op that qfx's quantization side knows, holding
// everything it knows about it: its canonical name (the BackendConfig spelling),
// the aten spellings and torch.nn module classes that mean it, the quantization
// categories a target may give it, and its ONNX emission per opset (registered as
// torch.onnx registers symbolic functions: by op and the lowest opset it is valid
// for). The runtime side (which ONNX ops run as which kernels) is the runtime's
// op schemas and kernel registry (qfx/runtime/op_schema.h, registry.h).
//
// Adding an op is one record (in the family file under quant/src/export/ that
// registers its neighbours) plus its runtime kernels; canonical_op_name,
// BackendConfig's validation and the ONNX exporter read the catalog.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "qfx/quant/backend_config.h"

namespace torch::nn {
class Module;
}
namespace qfx::fx {
class Node;
}

namespace qfx::quant {
namespace detail {
class Exporter;  // export_onnx's per-graph state (quant/src/export/exporter.h)
}

/// One ONNX emission of an op, valid from opset `since_opset` on.
struct OnnxExport {
  int since_opset = 1;  ///< the lowest ONNX opset the emitted nodes exist in
  /// Emits a call_function node (an aten call). Throws UnsupportedOpError naming
  /// the node for an overload or argument it cannot express.
  std::function<void(detail::Exporter&, fx::Node&)> function;
  /// Emits a call_module node of one of the record's module classes, reading the
  /// module's options. Empty: the module is called with the function's arguments
  /// (ReLU(x) as relu(x)) and `function` emits it.
  std::function<void(detail::Exporter&, fx::Node&, torch::nn::Module&)> module;
};

/// What qfx knows about one op.
struct OpRecord {
  std::string name;                  ///< canonical name: BackendConfig key, QConfigMapping object type
  std::vector<std::string> aten;     ///< other aten spellings meaning this op ("view" for reshape)
  std::vector<std::string> modules;  ///< torch.nn module classes meaning this op ("Conv2d")
  /// The quantization categories a BackendConfig may give the op (`ops:` kinds);
  /// empty: not a BackendConfig key, the op always computes in float (shape
  /// arithmetic such as size and getitem, float math between quantized groups).
  std::vector<OpKind> kinds;
  std::vector<OnnxExport> onnx;  ///< emissions, by since_opset ascending
  /// The ONNX op of its 256-entry table form (a target's `arithmetic.lut` may name
  /// the op; the runtime's schema of this ONNX op says `table`); empty: none.
  std::string table_onnx;
  /// The ONNX op of its integer-only (I-BERT) form (`arithmetic.integer_only`); empty: none.
  std::string integer_only_onnx;
  std::string summary;           ///< one line saying what the op computes (`qfx ops`)

  /// A record named `n` with nothing else known yet; the setters below fill it.
  explicit OpRecord(std::string n) : name(std::move(n)) {}
  /// Sets `aten` (spellings without "aten::" and overload, e.g. {"view"}).
  OpRecord& also_aten(std::vector<std::string> v) { aten = std::move(v); return *this; }
  /// Sets `modules` (torch.nn class names, e.g. {"Conv2d"}).
  OpRecord& also_modules(std::vector<std::string> v) { modules = std::move(v); return *this; }
  /// Sets `kinds` (weighted_kinds() or activation_kinds()).
  OpRecord& quantized_as(std::vector<OpKind> v) { kinds = std::move(v); return *this; }
  /// Sets `summary`.
  OpRecord& describe(std::string s) { summary = std::move(s); return *this; }
  /// Sets `table_onnx` (the ONNX op type of the table form, e.g. "Sigmoid").
  OpRecord& as_table(std::string onnx_op) { table_onnx = std::move(onnx_op); return *this; }
  /// Sets `integer_only_onnx` (e.g. "Gelu").
  OpRecord& as_integer_only(std::string onnx_op) { integer_only_onnx = std::move(onnx_op); return *this; }
  /// Adds an emission valid from `since_opset` on.
  OpRecord& to_onnx(std::function<void(detail::Exporter&, fx::Node&)> f,
                    std::function<void(detail::Exporter&, fx::Node&, torch::nn::Module&)> m = nullptr,
                    int since_opset = 1);
};

/// Categories of an op with weights (conv, linear, recurrent layers).
std::vector<OpKind> weighted_kinds();
/// Categories of an op without weights: its own qparams, its input's, a fixed
/// range, or float.
std::vector<OpKind> activation_kinds();

/// The catalog: records by name, with lookups by aten spelling and module class.
class OpCatalog {
 public:
  /// Adds a record. Throws InternalError when its name, an aten spelling or a
  /// module class is already taken by another record.
  void add(OpRecord r);
  /// The record named `name`, or null.
  const OpRecord* find(const std::string& name) const;
  /// The canonical name of aten spelling `aten` (without "aten::" and overload),
  /// or "" when no record lists it (the spelling is then its own name).
  std::string name_of_aten(const std::string& aten) const;
  /// The canonical name of module class `cls` ("Conv2d" -> "conv2d"), or "".
  std::string name_of_module(const std::string& cls) const;
  /// The emission of `name` for `opset`: the record's latest with since_opset <=
  /// opset; null when the op or such an emission does not exist.
  const OnnxExport* onnx_export(const std::string& name, int opset) const;
  /// Names of the records a BackendConfig may list (kinds not empty), sorted.
  std::vector<std::string> configurable_names() const;
  /// Every record, by name.
  const std::map<std::string, OpRecord>& records() const { return records_; }

 private:
  std::map<std::string, OpRecord> records_;
  std::map<std::string, std::string> aten_, modules_;
};

/// The built-in catalog, filled on first use from the family files' registration
/// functions (quant/src/export/op_catalog.cpp lists them).
const OpCatalog& op_catalog();

}  // namespace qfx::quant
