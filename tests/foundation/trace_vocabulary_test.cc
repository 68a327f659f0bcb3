// The trace vocabulary against docs/formats.md ("trace.json"): the category
// names, the lane names in thread-id order, the phase names; each parses back.
#include "core/trace_vocabulary.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace strata::trace {
namespace {

TEST(TraceVocabulary, NamesAreTheDocumentedOnesAndParseBack) {
  const std::vector<std::string> categories = {"gemm", "attention", "elementwise", "tp",   "pp", "dp",
                                               "zero", "optimizer", "copy",        "host", "cp", "ep",
                                               "bubble", "wait"};
  ASSERT_EQ(static_cast<int>(categories.size()), kNumCategories);
  for (int i = 0; i < kNumCategories; ++i) {
    const Category c = static_cast<Category>(i);
    EXPECT_EQ(to_string(c), categories[i]);
    Category back = Category::kCopy;
    ASSERT_TRUE(parse_category(categories[i], &back));
    EXPECT_EQ(back, c);
  }
  Category unused;
  EXPECT_FALSE(parse_category("gemm ", &unused));
  EXPECT_FALSE(parse_category("", &unused));
  const std::vector<std::string> lanes = {"compute", "tp-comm", "dp-comm", "pp-send", "pp-recv", "copy", "dp-reduce", "host"};
  ASSERT_EQ(static_cast<int>(lanes.size()), kNumLanes);
  for (int t = 0; t < kNumLanes; ++t) EXPECT_EQ(to_string(static_cast<Lane>(t)), lanes[t]);
  EXPECT_EQ(kExposedLaneTid, 8);  // after the streams, as docs/formats.md numbers it
  EXPECT_STREQ(kExposedLaneName, "exposed");
  for (const auto& [name, phase] : std::vector<std::pair<std::string, Phase>>{
           {"fwd", Phase::kForward}, {"bwd", Phase::kBackward}, {"recompute", Phase::kRecompute}, {"step", Phase::kStep},
           {"wgrad", Phase::kWeightGrad}}) {
    EXPECT_EQ(to_string(phase), name);
    Phase back = Phase::kStep;
    ASSERT_TRUE(parse_phase(name, &back));
    EXPECT_EQ(back, phase);
  }
  Phase p;
  EXPECT_FALSE(parse_phase("forward", &p));
  // The lists error messages show hold every name above, in order.
  EXPECT_EQ(phase_names(), "fwd, bwd, recompute, step, wgrad");
  EXPECT_EQ(category_names(), "gemm, attention, elementwise, tp, pp, dp, zero, optimizer, copy, host, cp, ep, bubble, wait");
  EXPECT_TRUE(is_communication(Category::kZero));
  EXPECT_TRUE(is_communication(Category::kCp));
  EXPECT_TRUE(is_communication(Category::kEp));
  EXPECT_FALSE(is_communication(Category::kCopy));
  EXPECT_FALSE(is_communication(Category::kHost));
  EXPECT_FALSE(is_communication(Category::kBubble));
  EXPECT_FALSE(is_communication(Category::kWait));
}

}  // namespace
}  // namespace strata::trace
