// A runtime plug-in whose registration throws, as a vendor's does when its SDK is
// missing: qfx must report it with the plug-in's path, not as its own failure.
#include <stdexcept>

#include "qfx/runtime/registry.h"

QFX_RUNTIME_PLUGIN { throw std::runtime_error("vendor SDK libnpu.so.3 not found"); }
