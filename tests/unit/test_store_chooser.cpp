// The choice of FIFO stores: both kinds timed first, then the faster one, with the other
// tried once in every kExploreEvery calls so a change of placement is noticed.
#include <gtest/gtest.h>

#include "core/store_chooser.hpp"

namespace strata {
namespace {

// Runs `calls` calls where ordinary stores take `ordinary` seconds and non-temporal ones
// `streaming`; returns how many used non-temporal stores.
int streamed_calls(StoreChooser& c, int calls, double ordinary, double streaming) {
  int n = 0;
  for (int i = 0; i < calls; ++i) {
    const bool s = c.streaming();
    n += s;
    c.record(s, s ? streaming : ordinary);
  }
  return n;
}

TEST(StoreChooser, TriesBothKindsFirst) {
  StoreChooser c;
  int streamed = streamed_calls(c, static_cast<int>(StoreChooser::kFirstCalls), 1.0, 1.0);
  EXPECT_EQ(streamed, static_cast<int>(StoreChooser::kFirstCalls) / 2);
}

// The first call of a plan is slow whatever its stores (page faults, cold caches): it does
// not count against ordinary stores, which it uses.
TEST(StoreChooser, ColdFirstCallIsNotCounted) {
  StoreChooser c;
  ASSERT_FALSE(c.streaming());
  c.record(false, 100.0);
  streamed_calls(c, static_cast<int>(StoreChooser::kFirstCalls) - 1, 1.0, 2.0);
  const int calls = 4 * static_cast<int>(StoreChooser::kExploreEvery);
  EXPECT_LE(streamed_calls(c, calls, 1.0, 2.0), calls / static_cast<int>(StoreChooser::kExploreEvery) + 1);
}

TEST(StoreChooser, KeepsTheFasterKindAndExploresTheOther) {
  const int calls = 16 * static_cast<int>(StoreChooser::kExploreEvery);
  for (bool streaming_faster : {false, true}) {
    StoreChooser c;
    streamed_calls(c, static_cast<int>(StoreChooser::kFirstCalls), 1.0, 1.0);
    const double ordinary = streaming_faster ? 2.0 : 1.0, streaming = streaming_faster ? 1.0 : 2.0;
    const int streamed = streamed_calls(c, calls, ordinary, streaming);
    const int other = streaming_faster ? calls - streamed : streamed;  // calls of the slower kind
    EXPECT_GE(other, calls / static_cast<int>(StoreChooser::kExploreEvery) - 1) << "the slower kind is still tried";
    EXPECT_LE(other, calls / static_cast<int>(StoreChooser::kExploreEvery) + 2) << "but only now and then";
  }
}

TEST(StoreChooser, FollowsAChangeOfPlacement) {
  StoreChooser c;
  EXPECT_LE(streamed_calls(c, 64, 1.0, 2.0), 64 / static_cast<int>(StoreChooser::kExploreEvery) + 2)
      << "ordinary stores are faster";
  // The placement changes: now non-temporal stores are twice as fast. A few explorations
  // of them are enough to switch.
  streamed_calls(c, 4 * static_cast<int>(StoreChooser::kExploreEvery), 2.0, 1.0);
  const int streamed = streamed_calls(c, 64, 2.0, 1.0);
  EXPECT_GE(streamed, 64 - 64 / static_cast<int>(StoreChooser::kExploreEvery) - 1);
}

}  // namespace
}  // namespace strata
