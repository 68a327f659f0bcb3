// OpName (sim/workload/task_annotations.h): a detail op's name kept once per
// process, so that copying a collapsed stretch's thousands of ops copies pointers.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "sim/workload/task_annotations.h"

namespace strata::sim {
namespace {

TEST(OpName, EqualTextsShareOneCopy) {
  const std::string built = std::string("fc1") + " dgrad";
  const OpName a(built);
  const OpName b("fc1 dgrad");
  EXPECT_EQ(&a.str(), &b.str());  // one copy of the text
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.str(), "fc1 dgrad");
  const OpName c("fc1 wgrad");
  EXPECT_FALSE(a == c);
  EXPECT_EQ(OpName().str(), "");
  const OpName copy = a;  // a pointer copy
  EXPECT_EQ(&copy.str(), &a.str());
}

TEST(OpName, ThreadsInterningTheSameNamesGetTheSameCopies) {
  // Sweeps build workloads on several threads at once.
  std::vector<std::vector<const std::string*>> seen(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&seen, t] {
      for (int i = 0; i < 500; ++i) seen[t].push_back(&OpName("layer " + std::to_string(i % 50)).str());
    });
  }
  for (std::thread& th : threads) th.join();
  for (std::size_t t = 1; t < seen.size(); ++t) EXPECT_EQ(seen[t], seen[0]);
  EXPECT_EQ(*seen[0][7], "layer 7");
  EXPECT_EQ(seen[0][7], seen[0][57]);
}

}  // namespace
}  // namespace strata::sim
