// Internal: ptq.mixed_precision's keys and reader.
#pragma once

#include "sections.h"

namespace qfx::quant::sections {

/// The keys of the `ptq.mixed_precision` mapping.
const KeyTable& mixed_precision_keys();
/// ptq.mixed_precision of ptq section `p` (a mapping with a budget, or false)
/// into c->ptq. ConfigError at the value for a bad candidate, no budget, or
/// ptq.auto_fallback set too.
void read_mixed_precision(const SectionReader& p, JobConfig* c);

}  // namespace qfx::quant::sections
