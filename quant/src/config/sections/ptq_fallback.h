// Internal: ptq.auto_fallback's keys and reader (the ptq section's largest switch).
#pragma once

#include "sections.h"

namespace qfx::quant::sections {

/// The keys of the `ptq.auto_fallback` mapping.
const KeyTable& auto_fallback_keys();
/// ptq.auto_fallback of ptq section `p`: `true` / `false` or its mapping, into
/// c->ptq; metric top1 needs labels (its own data's, or calibration.data's).
void read_auto_fallback(const SectionReader& p, JobConfig* c);

}  // namespace qfx::quant::sections
