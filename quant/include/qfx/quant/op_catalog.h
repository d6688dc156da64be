// The op catalog: one record per op that qfx's quantization side knows, holding
// everything it knows about it: its canonical name (the BackendConfig spelling),
// the aten spellings and torch.nn module classes that mean it, the quantization
// categories a target may give it, and its ONNX emission per opset (registered as
// torch.onnx registers symbolic functions: by op and the lowest opset it is valid
// for). The runtime side (which ONNX ops run as which kernels) is the runtime's
// op schemas and kernel registry (qfx/runtime/op_schema.h, registry.h).
//
// Adding an op is one record (in the family file under quant/src/export/ that
// registers its neighbours) plus its runtime kernels; an elementwise op that is one
// ONNX op with float attributes is a row of fx's shared table instead
// (qfx/fx/onnx_unary_ops.h, read by the float-ONNX reader too), which
// export_unary_ops.cpp turns into records. canonical_op_name, the passes,
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

/// The post-activation of a fused module (FusedConvLinear) or of a fusion pattern.
enum class FusedActivation { kNone, kReLU, kReLU6 };

/// The place an op can take in a fusion pattern (a BackendConfig's `fusions`,
/// fuse_fx, prepare_fx's elementwise fusions): conv/linear [+ batch norm]
/// [+ activation], or [add|mul, activation].
enum class FusionRole {
  kNone,
  kWeightedHead,     ///< a conv or linear layer that starts a pattern and takes what follows in
  kBatchNorm,        ///< folded into the weighted head before it
  kActivation,       ///< ends a pattern; OpRecord::fused_activation says which
  kElementwiseHead,  ///< add / mul: with the activation after it, quantized as one op
};

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
  /// The ONNX op types (default domain) its emissions may write, at any opset; the
  /// exporter throws InternalError for a node of another type, so this list is what
  /// the runtime must run for the op (tested against its schemas and kernels).
  std::vector<std::string> onnx_ops;
  /// The ONNX op of its 256-entry table form (a target's `arithmetic.lut` may name
  /// the op; the runtime's schema of this ONNX op says `table`); empty: none.
  std::string table_onnx;
  /// The ONNX op of its integer-only (I-BERT) form (`arithmetic.integer_only`); empty: none.
  std::string integer_only_onnx;
  std::string summary;           ///< one line saying what the op computes (`qfx ops`)
  FusionRole fusion = FusionRole::kNone;  ///< its place in fusion patterns
  /// With fusion kActivation: the activation a fused module applies for it.
  FusedActivation fused_activation = FusedActivation::kNone;
  /// A recurrent layer (aten::lstm.input, gru.input): its weights, initial states of
  /// zeros and their quantizers belong to it.
  bool recurrent = false;
  /// The keyword arguments its function emission reads (gelu's "approximate",
  /// _to_copy's "dtype"). The exporter refuses a call passing any other keyword at a
  /// value other than the operator schema's default (UnsupportedOpError naming the
  /// node and keyword), so an argument the emission ignores never changes the result
  /// silently; device, layout, pin_memory, memory_format and non_blocking never do.
  std::vector<std::string> kwargs;

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
  /// Sets `fusion` (and, for kActivation, `fused_activation`).
  OpRecord& fuses_as(FusionRole role, FusedActivation a = FusedActivation::kNone) {
    fusion = role;
    fused_activation = a;
    return *this;
  }
  /// Sets `recurrent`.
  OpRecord& as_recurrent() { recurrent = true; return *this; }
  /// Sets `kwargs` (the keyword arguments the function emission reads).
  OpRecord& reads_kwargs(std::vector<std::string> k) { kwargs = std::move(k); return *this; }
  /// Adds `ops` to `onnx_ops` (the ONNX op types the emissions write).
  OpRecord& writes(const std::vector<std::string>& ops);
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
  /// The fusion role of op `name`; kNone for an op without a record.
  FusionRole fusion_role(const std::string& name) const;
  /// Names of the records a BackendConfig may list (kinds not empty), sorted.
  std::vector<std::string> configurable_names() const;
  /// Every record, by name.
  const std::map<std::string, OpRecord>& records() const { return records_; }

 private:
  std::map<std::string, OpRecord> records_;
  std::map<std::string, std::string> aten_, modules_;
};

/// The ONNX op types export_onnx writes outside any record's emission: the Q/DQ
/// pairs, quantized conv / linear layers with their fused activations, graph outputs.
const std::vector<std::string>& core_onnx_ops();

/// Every ONNX op type export_onnx can write: core_onnx_ops() and every record's
/// onnx_ops, sorted, without repeats.
std::vector<std::string> emitted_onnx_ops();

/// The built-in catalog, filled on first use from the family files' registration
/// functions (quant/src/export/op_catalog.cpp lists them).
const OpCatalog& op_catalog();

}  // namespace qfx::quant
