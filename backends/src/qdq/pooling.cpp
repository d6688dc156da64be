// QDQ rules of the averaging pools: AveragePool -> QLinearAveragePool,
// GlobalAveragePool -> QLinearGlobalAveragePool (MaxPool moves codes: rules.h).
#include "rules.h"

namespace qfx::runtime::ir::qdq {

void register_pooling_qdq_rules() {
  for (const char* op : {"AveragePool", "GlobalAveragePool"}) register_qdq_rule(op, unary_form);
}

}  // namespace qfx::runtime::ir::qdq
