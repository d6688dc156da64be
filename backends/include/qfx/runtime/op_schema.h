// Op schemas: everything the runtime knows about an op independent of any kernel
// (as ONNX's OpSchema), in one record: how many inputs every implementation may
// rely on, which inputs must be float32, whether it is an integer form that
// computes on the codes its qparams describe (qfx's int8 ops after QDQ matching),
// whether it only moves values, its integer (QDQ) form and which inputs that form
// quantizes, its table form, how its integer form requantizes, and its
// multiply-accumulate count. make_kernel checks a node against its op's schema
// before asking any implementation, so kernels never index past a malformed node's
// inputs or read codes as floats; the loader, QDQ matching, the MAC count and the
// integer-op description read the same records. No other list of op names exists.
//
// The built-in schemas cover the ONNX ops and int8 forms qfx's kernels run; a
// plug-in registers schemas for its own ops with register_op_schema. An op
// without a schema needs one input and has no dtype rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qfx/runtime/tensor.h"

namespace qfx::runtime {

/// Shapes a MAC count reads: the node's input 0 (`x`), input 1 (`w`) and output 0
/// (`y`), logical (NCHW), all non-empty; `attr_i` reads an integer attribute of the
/// node (name, default).
struct MacShapes {
  const std::vector<int64_t>& x;
  const std::vector<int64_t>& w;
  const std::vector<int64_t>& y;
  std::function<int64_t(const std::string&, int64_t)> attr_i;
};

/// How an integer form requantizes (what Model::integer_ops describes of it).
enum class Rescale {
  kNone,         ///< moves codes, or not an integer form
  kAccumulator,  ///< int32 (int64 for int16 inputs) accumulator to output codes, per output channel (conv, gemm, matmul)
  kElementwise,  ///< two inputs rescaled to a common scale, then to the output (add, mul)
  kPerInput,     ///< each input rescaled to the output's scale (relu, clip, concat)
  kWindowAverage,  ///< the input rescaled to the output's scale, divided by the window's element count (average pools)
  kTable,        ///< a 256-entry table of output codes (the `table` attribute)
  kIntegerOnly,  ///< I-BERT's integer-only arithmetic (GELU, Softmax, LayerNorm)
  kSoftmax,      ///< TFLite's int8 softmax (Arithmetic::softmax_fixed_point): every constant follows from the qparams
};

/// One op's schema.
struct OpSchema {
  std::string op;           ///< op type after QDQ matching ("Conv", "QLinearConv")
  size_t min_inputs = 1;    ///< inputs every implementation relies on (ONNX spec's required inputs)
  size_t float_inputs = 0;  ///< its first float_inputs inputs must be float32
  /// Computes on integer codes: its quantized inputs must be the uint8 / int8 codes
  /// their qparams describe, and Model::int8_ops counts it.
  bool integer = false;
  /// Integer form whose first input may be int16 codes (16x8 conv / gemm / matmul).
  bool wide_input = false;
  /// The dtypes input 0 may have, when the op takes several (MaxPool: float32 or
  /// 8-bit codes); empty: no rule beyond float_inputs and integer.
  std::vector<DType> input0_dtypes;
  /// A pure elementwise float function of its one computed input (other inputs
  /// scalar constants): a chain of such ops between DequantizeLinear and
  /// QuantizeLinear runs as one 256-entry table on the codes (QLut).
  bool tabulable = false;
  /// Runs alone as a 256-entry table on the codes (QLut) between DequantizeLinear
  /// and QuantizeLinear: always under ONNX's arithmetic (the table equals the float
  /// group), under a target's when its `arithmetic.lut` names the op.
  bool table = false;
  /// Computes nothing: every output element is a copy of an input element, so every
  /// backend gives the same bits (Reshape, Concat, Gather, MaxPool ...).
  bool moves_values = false;
  /// Every backend computes it to the same bits: it moves values, or each output
  /// element is one operation ONNX rounds exactly (DequantizeLinear). The reference
  /// check expects bit-identical outputs only from integer ops and these.
  bool bit_exact = false;
  /// Moves the values of input 0 alone (its other inputs are shape or index
  /// parameters) and its kernels move 8-bit codes as well: QDQ matching sinks a
  /// per-tensor DequantizeLinear below it and raises a QuantizeLinear above it.
  bool moves_codes = false;
  /// Its integer form after QDQ matching ("Conv" -> "QLinearConv"); its own name for
  /// an op that runs on codes unchanged (MaxPool, shape ops); empty: none. An op
  /// with a form has a QDQ rule (qdq_rules.h) registered by its op family.
  std::string qdq_form;
  /// The inputs that form quantizes, in order (Conv: {0, 1}: x and w); -1 alone:
  /// every input (Concat).
  std::vector<int> qdq_inputs;
  /// The float op whose QDQ group a target's `arithmetic.integer_only` replaces by
  /// this integer form ("Gelu" for QIntGelu); empty: none.
  std::string integer_only_of;
  /// How the integer form requantizes.
  Rescale rescale = Rescale::kNone;
  /// Its float32 initializer inputs must be finite (weights, biases, normalisation
  /// parameters, scales): the loader names a NaN or infinity at load.
  bool finite_parameters = false;
  /// Multiply-accumulates of one run at the given shapes; unset: counts none.
  std::function<int64_t(const MacShapes&)> macs;
  std::string summary;      ///< one line: what it computes, its spec
};

/// Registers (or replaces) the schema of `s.op`. Throws ArgumentError for an empty op.
void register_op_schema(const OpSchema& s);

/// The schema of `op`, or null when none is registered.
const OpSchema* find_op_schema(const std::string& op);

/// Every registered schema, by op.
std::vector<OpSchema> op_schemas();

/// The ops whose schema has the table form (OpSchema::table), by op: what a
/// target's `arithmetic.lut` may name.
std::vector<std::string> lut_op_types();

/// The float ops a target's `arithmetic.integer_only` may name (OpSchema::integer_only_of
/// of the integer forms: "Gelu", "LayerNormalization", "Softmax"), sorted.
std::vector<std::string> integer_only_op_types();

}  // namespace qfx::runtime
