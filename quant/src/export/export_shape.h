// Internal: export_onnx's shape arithmetic (export_shape_ops.cpp), which the pool,
// resize, norm, elementwise and recurrent families use too: sizes are static at
// export (batch_shapes) but for the dynamic batch, which stays symbolic (Dim).
#pragma once

#include "exporter.h"

namespace qfx::quant::detail {

/// The dims of tensor argument `a` of `user` (batch_shapes, computed on first
/// need); unsupported() for a non-tensor or a value of unknown shape.
const std::vector<Dim>& dims_of(Exporter& e, const fx::Node& user, const fx::Argument& a);
/// The shape of tensor argument `a` of `user` when it is static: a parameter's own, else
/// the propagated one; unsupported() naming `user` when a dim depends on the batch.
std::vector<int64_t> dims_static(Exporter& e, const fx::Node& user, const fx::Argument& a);
/// True for an int constant or an int computed from sizes.
bool is_int(Exporter& e, const fx::Argument& a);
/// True when both operands of a binary node are ints (size arithmetic).
bool int_operands(Exporter& e, const fx::Node& n);
/// The value of an int argument (a constant or computed from sizes).
Dim int_of(Exporter& e, const fx::Node& user, const fx::Argument& a);
/// `d` (negative: from the end) as a dim of a rank-`rank` tensor; unsupported() when out of range.
int64_t norm_dim(const fx::Node& n, int64_t d, size_t rank);
/// The int list argument `i` of `n` (constants, a size() list, or computed ints).
std::vector<Dim> size_list(Exporter& e, const fx::Node& n, size_t i);
/// add / sub / mul / floordiv of two ints of `n` (sizes): the result, a multiple of
/// the batch where it stays one. Writes no ONNX node.
void int_arith(Exporter& e, fx::Node* n, const std::string& op);
/// The ONNX value of sizes `entries` (a 1-D int64 tensor): an initializer named after
/// `hint` for static runs, a multiple of the dynamic batch read from the first graph
/// input's Shape (ONNX Shape, Slice, Mul, Concat). unsupported() naming `n` for a
/// negative size (but -1 where `minus_one` allows it: a Reshape's inferred dim) or a
/// batch the first graph input does not carry as its dynamic dim 0.
std::string sizes_value(Exporter& e, const fx::Node& n, const std::vector<Dim>& entries, const std::string& hint,
                        bool minus_one = false);
/// A Reshape of n's first argument to `shape` (ONNX Reshape's: 0 copies, one -1).
void reshape_to(Exporter& e, fx::Node* n, const std::vector<int64_t>& shape);
/// x[start:end:step] along `axis`: one ONNX Slice writing value `y`, node `name`.
void slice_axis(Exporter& e, const std::string& x, int64_t start, int64_t end, int64_t axis, int64_t step, const std::string& y,
                const std::string& name);

}  // namespace qfx::quant::detail
