#include <gtest/gtest.h>
#include "qfx/fx/tracer.h"
TEST(Tracer, Placeholder) { SUCCEED(); }
