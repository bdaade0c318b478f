// The plan cache builds each distinct call's plan once and keeps the executor's slot beside it.
#include <gtest/gtest.h>

#include "algorithms/algorithms.hpp"
#include "core/plan_cache.hpp"
#include "strata/error.hpp"

using namespace strata;

namespace {
Call call(Collective c, size_t count, DataType t = DataType::float32, int root = 0) {
  Call k;
  k.coll = c;
  k.count = count;
  k.type = t;
  k.root = root;
  return k;
}
struct Tag : PlanSlot {
  int value;
  explicit Tag(int v) : value(v) {}
};
}  // namespace

TEST(PlanCache, BuildsEachDistinctCallOnceAndKeepsItsSlot) {
  PlanCache cache;
  int builds = 0;
  auto build = [&] {
    ++builds;
    Plan p;
    p.algo = "x";
    return p;
  };
  CachedPlan& a = cache.get(PlanCache::key_of(call(Collective::all_reduce, 10), false), build);
  a.slot = std::make_unique<Tag>(5);
  cache.get(PlanCache::key_of(call(Collective::all_reduce, 10), false), build);
  EXPECT_EQ(builds, 1);
  // Anything in the key makes another plan: count, type size, root, forward, collective.
  cache.get(PlanCache::key_of(call(Collective::all_reduce, 11), false), build);
  cache.get(PlanCache::key_of(call(Collective::all_reduce, 10, DataType::float64), false), build);
  cache.get(PlanCache::key_of(call(Collective::broadcast, 10, DataType::float32, 1), false), build);
  cache.get(PlanCache::key_of(call(Collective::all_reduce, 10), true), build);
  EXPECT_EQ(builds, 5);
  // Same size, other type: one plan (plans count elements of a size, not types).
  cache.get(PlanCache::key_of(call(Collective::all_reduce, 10, DataType::int32), false), build);
  EXPECT_EQ(builds, 5);
  CachedPlan& again = cache.get(PlanCache::key_of(call(Collective::all_reduce, 10), false), build);
  EXPECT_EQ(&again, &a);
  ASSERT_TRUE(again.slot);
  EXPECT_EQ(static_cast<Tag&>(*again.slot).value, 5);
}

TEST(PlanCache, StaysBoundedOverASizeSweep) {
  PlanCache cache;
  int builds = 0;
  for (size_t n = 1; n <= 3 * PlanCache::kMaxPlans; ++n)
    cache.get(PlanCache::key_of(call(Collective::all_reduce, n), false), [&] { ++builds; return Plan{}; });
  EXPECT_EQ(builds, static_cast<int>(3 * PlanCache::kMaxPlans));
  EXPECT_LE(cache.plans_kept(), PlanCache::kMaxPlans);
  // The last call is still found after the cache was cleared behind it.
  cache.get(PlanCache::key_of(call(Collective::all_reduce, 3 * PlanCache::kMaxPlans), false), [&] { ++builds; return Plan{}; });
  EXPECT_EQ(builds, static_cast<int>(3 * PlanCache::kMaxPlans));
}

TEST(PlanCache, GroupSlotsStayBoundedAndKeepTheirState) {
  PlanCache cache;
  bool first = false;
  cache.group_slot(1 << 20, &first) = std::make_unique<Tag>(7);
  EXPECT_TRUE(first);
  EXPECT_EQ(static_cast<Tag&>(*cache.group_slot(1 << 20, &first)).value, 7);
  EXPECT_FALSE(first);  // the size ran before: its INFO line is not printed again
  for (size_t bytes = 1; bytes <= 3 * PlanCache::kMaxPlans; ++bytes) cache.group_slot(bytes);
  EXPECT_LE(cache.group_slots_kept(), PlanCache::kMaxPlans);
  cache.group_slot(1 << 20, &first);
  EXPECT_TRUE(first);  // cleared behind it
}

TEST(P2PPlan, OneRoundOfTransfersAndSelfPairsBecomeCopies) {
  char a[8], b[8], c[4], d[4];
  std::vector<P2POp> ops = {{true, a, 8, 1}, {false, b, 8, 2}, {true, c, 4, 0}, {false, d, 4, 0}, {true, a, 0, 3}};
  Plan p = p2p_plan(ops, /*rank=*/0);
  ASSERT_EQ(p.rounds(), 1u);
  ASSERT_EQ(p.steps.size(), 3u);  // the zero-byte send is dropped
  EXPECT_EQ(p.steps[0].kind, StepKind::send);
  EXPECT_EQ(p.steps[0].peer, 1);
  EXPECT_EQ(p.steps[1].kind, StepKind::recv);
  EXPECT_EQ(p.steps[1].peer, 2);
  EXPECT_EQ(p.steps[2].kind, StepKind::copy);
  EXPECT_EQ(p.steps[2].src.offset, reinterpret_cast<uintptr_t>(c));
  EXPECT_EQ(p.steps[2].dst.offset, reinterpret_cast<uintptr_t>(d));
  EXPECT_EQ(p.steps[2].count, 4u);
}

TEST(P2PPlan, UnmatchedSelfTransfersAreRefused) {
  char a[8], b[4];
  EXPECT_THROW(p2p_plan({{true, a, 8, 0}}, 0), InvalidArgument);
  EXPECT_THROW(p2p_plan({{true, a, 8, 0}, {false, b, 4, 0}}, 0), InvalidArgument);
}
