// Op schemas: what the runtime knows about an op independent of any kernel (as
// ONNX's OpSchema): how many inputs every implementation may rely on, which
// inputs must be float32, and whether it is an integer form that computes on the
// codes its qparams describe (qfx's int8 ops after QDQ matching). make_kernel
// checks a node against its op's schema before asking any implementation, so
// kernels never index past a malformed node's inputs or read codes as floats.
//
// The built-in schemas cover the ONNX ops and int8 forms qfx's kernels run; a
// plug-in registers schemas for its own ops with register_op_schema. An op
// without a schema needs one input and has no dtype rule.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "qfx/runtime/tensor.h"

namespace qfx::runtime {

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
  std::string summary;      ///< one line: what it computes, its spec
};

/// Registers (or replaces) the schema of `s.op`. Throws ArgumentError for an empty op.
void register_op_schema(const OpSchema& s);

/// The schema of `op`, or null when none is registered.
const OpSchema* find_op_schema(const std::string& op);

/// Every registered schema, by op.
std::vector<OpSchema> op_schemas();

}  // namespace qfx::runtime
