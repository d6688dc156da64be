// qfx bench's timing statistics: the median and interquartile range of repeated
// timings, and the noise warning's rule (spread above a quarter of the median,
// with at least 5 repetitions).
#include <gtest/gtest.h>

#include "../../tools/cli/bench_timing.h"

using qfx::cli::Timing;
using qfx::cli::timing_of;
using qfx::cli::timings_disagree;

TEST(BenchTiming, MedianAndInterquartileRange) {
  const Timing t = timing_of({5, 1, 4, 2, 3, 8, 7, 6});  // sorted 1..8: v[4] = 5, v[6] - v[2] = 7 - 3
  EXPECT_DOUBLE_EQ(t.median, 5);
  EXPECT_DOUBLE_EQ(t.iqr, 4);
  EXPECT_DOUBLE_EQ(t.spread(), 0.8);
  EXPECT_DOUBLE_EQ(timing_of({}).median, 0);
  EXPECT_DOUBLE_EQ(timing_of({}).spread(), 0);
}

TEST(BenchTiming, WarnsOnlyWhenRepeatedTimingsSpreadBeyondAQuarter) {
  const Timing steady = timing_of({10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 10.1});
  const Timing busy = timing_of({10, 10, 31, 48, 11, 12, 9, 40});  // a competing process on the same cores
  double worst = -1;
  EXPECT_FALSE(timings_disagree({steady, steady}, 8, &worst));
  EXPECT_LT(worst, 0.05);
  EXPECT_TRUE(timings_disagree({steady, busy}, 8, &worst));
  EXPECT_GT(worst, 0.25);
  EXPECT_FALSE(timings_disagree({steady, busy}, 4));  // too few runs for a spread
  EXPECT_FALSE(timings_disagree({timing_of({10, 10, 10, 10, 12.4})}, 5));  // iqr 0: steady
}
