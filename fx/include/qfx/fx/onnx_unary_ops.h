// The elementwise ops that are one op in both directions: an ONNX op (default
// domain) with float attributes <-> one aten op with scalar arguments after its
// tensor input. The float-ONNX reader (load_onnx_model) reads every row, and the
// quantization side's ONNX exporter writes every row, so such an op (Elu,
// LeakyRelu, HardSigmoid, Softplus, ...) is one row here plus its runtime kernel;
// the quantization catalog adds what only it knows (module classes, quantization
// categories, table forms).
#pragma once

#include <string>
#include <vector>

namespace qfx::fx {

/// One scalar argument of the aten op after its tensor input: an ONNX float
/// attribute, or a value the ONNX op cannot express otherwise (fixed).
struct UnaryOpArgument {
  /// The ONNX attribute carrying the argument ("alpha"); empty: the argument is
  /// fixed at `value` (the reader writes it, the exporter refuses any other value).
  std::string attribute;
  /// The attribute's default (ONNX's and aten's agree) or the fixed value.
  double value = 0;
};

/// An ONNX float attribute that is not an aten argument but must hold one value
/// for the aten op (HardSigmoid's alpha 1/6 and beta 0.5 are aten::hardsigmoid).
struct FixedOnnxAttribute {
  std::string name;     ///< ONNX attribute name
  double value = 0;     ///< the value the aten op computes with
  float onnx_default = 0;  ///< ONNX's default: the exporter writes the attribute only when `value` differs
};

/// One row: an ONNX op and the aten op it is.
struct UnaryOnnxOp {
  std::string onnx;      ///< ONNX op type ("Elu")
  std::string aten;      ///< aten op name without namespace and overload ("elu")
  std::string target;    ///< the fx call_function target the reader writes ("aten::elu")
  int since_opset = 1;   ///< the lowest ONNX opset in which the op has this form
  std::vector<UnaryOpArgument> arguments;  ///< aten arguments after the input, in order
  std::vector<FixedOnnxAttribute> fixed;   ///< attributes with one allowed value
  std::string summary;   ///< what the op computes, one line
};

/// Every row, in a fixed order; ONNX op types and aten names are each unique.
const std::vector<UnaryOnnxOp>& unary_onnx_ops();

/// The row of ONNX op type `onnx`, or null.
const UnaryOnnxOp* find_unary_onnx_op(const std::string& onnx);

/// The row of aten op `aten` (no namespace, no overload: "leaky_relu"), or null.
const UnaryOnnxOp* find_unary_aten_op(const std::string& aten);

}  // namespace qfx::fx
