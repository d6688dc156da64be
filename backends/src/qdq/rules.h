// Internal: QDQ fusion as per-op rules (as ONNX Runtime's QDQ selector/action
// transformer). The driver (qdq.cpp) walks the graph; for a node fed by a
// DequantizeLinear whose op schema has an integer form (OpSchema::qdq_form) it
// checks what every form needs (8-bit per-tensor activations; int16 only where the
// form says wide_input) and hands the group to the op's rule, registered by its op
// family next to the family's kernels. A rule selects (is the group whole and
// supported?) and acts (Ctx::replace by the integer form) or declines, saying why
// in the report when the group stays float. An op whose form is its own name
// (MaxPool, shape ops: they move codes) needs no rule of its own: it moves codes
// between identical qparams (same_qparams_rule).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "../qdq_match.h"

namespace qfx::runtime::ir::qdq {

/// One group handed to a rule: node `i` of `c.g`, whose input 0 the DequantizeLinear
/// `d0` feeds (8-bit, or int16 where the form is wide, per tensor). `report` takes
/// one line per group the rule leaves in float, with the reason.
struct Group {
  Ctx& c;
  size_t i;
  const Ctx::DQ& d0;
  const std::string& form;  ///< the op's integer form (OpSchema::qdq_form)
  std::vector<std::string>& report;
  const Node& node() const { return c.g.nodes[i]; }
};

/// A rule: replaces the group by the op's integer form and returns true, or
/// declines (false; the node stays float).
using QdqRule = std::function<bool(Group&)>;

/// Moves per-tensor DequantizeLinear nodes below the ops that move codes
/// (OpSchema::moves_codes) and QuantizeLinear nodes above them, then drops DQ -> Q
/// pairs with identical qparams (the identity on codes). Exact: moving values and
/// per-tensor (de)quantization commute. Runs before the rules.
void sink_dequantize(Graph& g);

/// Registers (or replaces) the rule of float op `op`.
void register_qdq_rule(const std::string& op, QdqRule rule);

/// The rule of `op`: its registered one, same_qparams_rule for an op whose schema's
/// qdq_form is its own name, else null.
const QdqRule* find_qdq_rule(const std::string& op);

/// Node i moves codes: DQ -> op -> Q with identical qparams on both sides becomes
/// the op on the codes (exact); other qparams: declines with a report line.
bool same_qparams_rule(Group& g);

/// Node i becomes its form on the codes of input 0, through the Q that alone reads it.
bool unary_form(Group& g);

// The op families' rules (each in its family's file).
void register_linear_qdq_rules();       ///< Conv, Gemm, MatMul (qdq/linear.cpp)
void register_elementwise_qdq_rules();  ///< Add, Mul, Relu, Clip (qdq/elementwise.cpp)
void register_pooling_qdq_rules();      ///< AveragePool, GlobalAveragePool (qdq/pooling.cpp)
void register_shape_qdq_rules();        ///< Concat (qdq/shape.cpp)

}  // namespace qfx::runtime::ir::qdq
