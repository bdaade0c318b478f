// Who owns what in an outer synchronisation (algorithms/outer_layout): islands from the
// hierarchy, fragments, shares and the schedule, checked element by element.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/outer_layout.hpp"
#include "strata/error.hpp"
#include "strata/wire_format.hpp"

using namespace strata;

namespace {

Hierarchy hosts(const std::vector<std::string>& h) { return build_hierarchy(h, {}, ""); }

}  // namespace

TEST(OuterLayout, IslandsFromTheOutermostLevel) {
  Islands is = find_islands(hosts({"a", "a", "b", "b", "c", "c"}), 0);
  EXPECT_EQ(is.count, 3);
  EXPECT_EQ(is.size, 2);
  EXPECT_EQ(is.island, (std::vector<int>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(is.local, (std::vector<int>{0, 1, 0, 1, 0, 1}));
  // Interleaved hosts: islands need not be consecutive.
  is = find_islands(hosts({"a", "b", "a", "b"}), 0);
  EXPECT_EQ(is.island, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(is.local, (std::vector<int>{0, 0, 1, 1}));
  // K islands as unions of hosts; on one host any K that divides the ranks.
  is = find_islands(hosts({"a", "a", "b", "b"}), 1);
  EXPECT_EQ(is.count, 1);
  EXPECT_EQ(is.size, 4);
  is = find_islands(hosts({"a", "a", "a", "a"}), 2);
  EXPECT_EQ(is.island, (std::vector<int>{0, 0, 1, 1}));
}

TEST(OuterLayout, IslandsThatCannotWork) {
  EXPECT_THROW(find_islands(hosts({"a", "a", "b"}), 0), InvalidArgument);            // uneven
  EXPECT_THROW(find_islands(hosts({"a", "a", "a", "a"}), 3), InvalidArgument);       // 3 does not divide 4
  EXPECT_THROW(find_islands(hosts({"a", "a", "b", "b"}), 4), InvalidArgument);       // splits host a
  EXPECT_THROW(find_islands(hosts({"a", "b", "a", "b"}), 2), InvalidArgument);       // consecutive ranks split hosts
}

// Every element in exactly one fragment and, inside it, in exactly one share; segments
// go to fragments in strides; padding makes shares and pieces whole wire blocks.
TEST(OuterLayout, EveryElementInOneFragmentAndOneShare) {
  const std::vector<size_t> segs = {70, 5, 300, 1, 129, 64, 7};
  size_t count = 0;
  for (size_t s : segs) count += s;
  for (int F : {1, 2, 3}) {
    for (int K : {1, 2, 3}) {
      for (int g : {1, 2, 4}) {
        OuterLayout l = outer_layout(count, segs, F, K, g, 6);
        std::vector<int> owner(count, -1), share_hits(count, 0);
        size_t packed = 0, shares = 0;
        for (size_t p = 0; p < l.fragments.size(); ++p) {
          const Fragment& f = l.fragments[p];
          EXPECT_EQ(f.packed, packed);
          EXPECT_EQ(f.share_at, shares);
          EXPECT_EQ(f.padded % (static_cast<size_t>(K * g) * kWireBlock), 0u);
          EXPECT_GE(f.padded, f.real);
          EXPECT_LT(f.padded - f.real, static_cast<size_t>(K * g) * kWireBlock);
          EXPECT_EQ(f.share * g, f.padded);
          packed += f.padded;
          shares += f.share;
          size_t seg_at = 0, real = 0;
          for (size_t j = 0; j < segs.size(); ++j) {  // segment j belongs to fragment j mod F
            if (j % F == p)
              for (size_t i = 0; i < segs[j]; ++i) owner[seg_at + i] == -1 ? void(owner[seg_at + i] = static_cast<int>(p)) : ADD_FAILURE();
            real += j % F == p ? segs[j] : 0;
            seg_at += segs[j];
          }
          EXPECT_EQ(f.real, real);
          for (int i = 0; i < g; ++i)
            for_each_run(f, i * f.share, (i + 1) * f.share, [&](size_t b, size_t q, size_t len) {
              EXPECT_GE(q, i * f.share);
              EXPECT_LE(q + len, (i + 1) * f.share);
              for (size_t e = 0; e < len; ++e) {
                EXPECT_EQ(owner[b + e], static_cast<int>(p));
                ++share_hits[b + e];
              }
            });
        }
        EXPECT_EQ(l.packed_size, packed);
        EXPECT_EQ(l.share_size, shares);
        for (size_t e = 0; e < count; ++e) {
          ASSERT_NE(owner[e], -1) << e;
          ASSERT_EQ(share_hits[e], 1) << "element " << e << " F " << F << " K " << K << " g " << g;
        }
      }
    }
  }
}

// Empty segments keep their place in the stride (segment j still belongs to fragment
// j mod F), and a fragment of empty segments only is empty: nothing to exchange.
TEST(OuterLayout, EmptySegmentsKeepTheirFragment) {
  OuterLayout l = outer_layout(30, {10, 0, 20, 0}, 2, 2, 1, 4);
  EXPECT_EQ(l.fragments[0].real, 30u);
  EXPECT_EQ(l.fragments[0].padded, 2 * kWireBlock);
  EXPECT_EQ(l.fragments[1].real, 0u);
  EXPECT_EQ(l.fragments[1].padded, 0u);
  EXPECT_EQ(l.fragments[1].share, 0u);
  EXPECT_EQ(l.packed_size, 2 * kWireBlock);
  OuterLayout m = outer_layout(20, {0, 20, 0}, 3, 1, 2, 3);  // the middle layers only
  EXPECT_EQ(m.fragments[0].padded, 0u);
  EXPECT_EQ(m.fragments[1].real, 20u);
  EXPECT_EQ(m.fragments[1].padded, 2 * kWireBlock);  // g 2: two shares of a block
  EXPECT_EQ(m.fragments[2].padded, 0u);
}

// Fragment p is exchanged at (p+1)·H/F + k·H: spread over H, the last one at H.
TEST(OuterLayout, Schedule) {
  OuterLayout l = outer_layout(400, {100, 100, 100, 100}, 4, 2, 1, 10);
  std::vector<long long> first;
  for (const Fragment& f : l.fragments) first.push_back(f.first);
  EXPECT_EQ(first, (std::vector<long long>{2, 5, 7, 10}));
  const Fragment& f = l.fragments[1];
  std::vector<long long> at;
  for (long long t = 0; t <= 30; ++t)
    if (exchanged_at(f, t, 10)) at.push_back(t);
  EXPECT_EQ(at, (std::vector<long long>{5, 15, 25}));
  EXPECT_EQ(last_exchange(f, 4, 10), -1);
  EXPECT_EQ(last_exchange(f, 5, 10), 5);
  EXPECT_EQ(last_exchange(f, 14, 10), 5);
  EXPECT_EQ(last_exchange(f, 15, 10), 15);
  // No segments given: F near-equal pieces.
  OuterLayout even = outer_layout(10, {}, 3, 1, 1, 3);
  EXPECT_EQ(even.fragments[0].real, 4u);
  EXPECT_EQ(even.fragments[1].real, 3u);
  EXPECT_EQ(even.fragments[2].real, 3u);
}

TEST(OuterLayout, CutsThatCannotWork) {
  EXPECT_THROW(outer_layout(0, {}, 1, 1, 1, 1), InvalidArgument);
  EXPECT_THROW(outer_layout(10, {4, 5}, 1, 1, 1, 1), InvalidArgument);     // sums to 9
  EXPECT_THROW(outer_layout(10, {5, 5}, 3, 1, 1, 4), InvalidArgument);     // F > segments
  EXPECT_THROW(outer_layout(10, {5, 5}, 0, 1, 1, 4), InvalidArgument);
}
