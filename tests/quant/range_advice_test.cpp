// range_advice on hand-made observer statistics: each rule fires exactly on the
// ranges it describes, at its thresholds.
#include <gtest/gtest.h>

#include <vector>

#include "../../quant/src/pipeline/range_advice.h"

namespace {

using nlohmann::json;
using qfx::quant::detail::range_advice;

// An observer entry with a histogram of `counts` over [hlo, hlo + width * counts.size()).
json entry(const std::string& qscheme, double min, double max, double lo, double hi, double hlo = 0, double width = 0,
           std::vector<double> counts = {}) {
  json o = {{"node", "x"}, {"qscheme", qscheme}, {"min", min}, {"max", max}, {"clip", {lo, hi}}};
  if (!counts.empty()) o["hist"] = {{"lo", hlo}, {"width", width}, {"counts", counts}};
  return o;
}

std::vector<std::string> problems(const json& advice) {
  std::vector<std::string> p;
  for (const auto& a : advice) p.push_back(a["problem"]);
  return p;
}

TEST(RangeAdvice, SymmetricOverNonNegativeValues) {
  EXPECT_EQ(problems(range_advice(json::array({entry("symmetric", 0.0, 6.0, -6.0, 6.0)}))),
            std::vector<std::string>{"symmetric_nonnegative"});
  EXPECT_TRUE(range_advice(json::array({entry("symmetric", -0.01, 6.0, -6.0, 6.0)})).empty());  // one negative value
  EXPECT_TRUE(range_advice(json::array({entry("affine", 0.0, 6.0, 0.0, 6.0)})).empty());
}

TEST(RangeAdvice, ClippingAboveOnePercent) {
  // 100 bins of width 1 over [0, 100), one count each: clipping to [0, 98] cuts 2 %, to [0, 99.5] 0.5 %.
  const std::vector<double> flat(100, 1.0);
  const json a = range_advice(json::array({entry("affine", 0, 100, 0, 98, 0, 1, flat)}));
  ASSERT_EQ(problems(a), std::vector<std::string>{"clipped"});
  EXPECT_NE(a[0]["detail"].get<std::string>().find("cuts 2.00% of the values"), std::string::npos) << a[0]["detail"];
  EXPECT_TRUE(range_advice(json::array({entry("affine", 0, 100, 0, 99.5, 0, 1, flat)})).empty());
  // A ReLU's zeros below a positive lower bound are not clipped: the range holds 0.
  std::vector<double> relu(100, 1.0);
  relu[0] = 50;
  EXPECT_TRUE(range_advice(json::array({entry("affine", 0, 100, 0.5, 100, 0, 1, relu)})).empty());
}

TEST(RangeAdvice, MassInAFewCodesOfAWideRange) {
  // All but one value in [0, 1) of a [0, 100] range (an outlier at 99.5): 1 % of the range.
  std::vector<double> h(100, 0.0);
  h[0] = 100000;
  h[99] = 1;
  EXPECT_EQ(problems(range_advice(json::array({entry("affine", 0, 100, 0, 100, 0, 1, h)}))),
            std::vector<std::string>{"concentrated"});
  // Spread over [0, 4): 4 % of the range, above the 1/32 threshold.
  std::vector<double> wide(100, 0.0);
  for (int i = 0; i < 4; ++i) wide[static_cast<size_t>(i)] = 25000;
  EXPECT_TRUE(range_advice(json::array({entry("affine", 0, 100, 0, 100, 0, 1, wide)})).empty());
}

}  // namespace
