// The wait policy: spin while the peer runs elsewhere, yield at once while it needs this
// CPU, and notice either change (src/core/wait_policy.hpp).
#include <gtest/gtest.h>

#include "core/wait_policy.hpp"

namespace strata {
namespace {

constexpr unsigned kSpin = WaitPolicy::kSpinPolls;

// Stalls that end as they do when the peer shares this CPU: after a yield that switched.
void shared_cpu_stalls(WaitPolicy& w, unsigned n) {
  for (unsigned i = 0; i < n; ++i) w.stall_ended(1, 1);
}

TEST(WaitPolicy, SpinsFirstUnlessOversubscribed) {
  EXPECT_EQ(WaitPolicy(false).spin_polls(), kSpin);
  WaitPolicy over(true);
  over.stall_ended(1, 1);  // the first stall (number 0) explores
  EXPECT_EQ(over.spin_polls(), 1u);
}

TEST(WaitPolicy, YieldsAtOnceAfterStallsEndedBySwitchingYields) {
  WaitPolicy w(false);
  shared_cpu_stalls(w, WaitPolicy::kSharedAfter - 1);
  EXPECT_EQ(w.spin_polls(), kSpin) << "one stall is not enough (a preempted peer looks the same once)";
  shared_cpu_stalls(w, 1);
  EXPECT_EQ(w.spin_polls(), 1u);
}

TEST(WaitPolicy, OneStallEndedWhileSpinningResetsTheEvidence) {
  WaitPolicy w(false);
  for (int i = 0; i < 10; ++i) {
    shared_cpu_stalls(w, WaitPolicy::kSharedAfter - 1);
    w.stall_ended(0, 0);
  }
  EXPECT_EQ(w.spin_polls(), kSpin);
}

TEST(WaitPolicy, YieldsThatSwitchNowhereMeanSpinningCostsNobody) {
  WaitPolicy w(false);
  shared_cpu_stalls(w, 2 * WaitPolicy::kSharedAfter);
  ASSERT_TRUE(w.yielding());
  w.stall_ended(5, 0);
  EXPECT_FALSE(w.yielding());
  EXPECT_EQ(w.spin_polls(), kSpin);
}

// While yielding, one stall in kExploreEvery spins the full budget: a peer that moved to
// another CPU answers within it, and the rank spins again.
TEST(WaitPolicy, ExploresSpinningWhileYielding) {
  WaitPolicy w(true);
  unsigned full = 0, polled = 0;
  for (unsigned i = 0; i < 4 * WaitPolicy::kExploreEvery; ++i) {
    full += w.spin_polls() == kSpin;
    ++polled;
    w.stall_ended(1, 1);
  }
  EXPECT_EQ(full, polled / WaitPolicy::kExploreEvery);
  while (w.spin_polls() != kSpin) w.stall_ended(1, 1);
  w.stall_ended(0, 0);  // the exploring stall ended while spinning
  EXPECT_FALSE(w.yielding());
}

}  // namespace
}  // namespace strata
