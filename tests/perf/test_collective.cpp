#include <gtest/gtest.h>

#include "collective.hpp"

namespace perf {
namespace {

TEST(Layout, AllReduceAndRooted) {
  for (Coll c : {Coll::all_reduce, Coll::broadcast, Coll::reduce, Coll::sendrecv, Coll::pipeline}) {
    const Layout l = layout_for(c, 1000, 4);
    EXPECT_EQ(l.send_count, 1000u);
    EXPECT_EQ(l.recv_count, 1000u);
    EXPECT_EQ(l.param_count, 1000u);
    EXPECT_EQ(l.send_inplace_off, 0u);
    EXPECT_EQ(l.recv_inplace_off, 0u);
    EXPECT_EQ(l.bytes(4), 4000u);
  }
}

TEST(Layout, PerRankCounts) {
  // count = size / 4 bytes = 1001 elements over 4 ranks: 250 per rank, size shown 1000*4.
  const Layout ag = layout_for(Coll::all_gather, 1001, 4);
  EXPECT_EQ(ag.send_count, 250u);
  EXPECT_EQ(ag.recv_count, 1000u);
  EXPECT_EQ(ag.param_count, 250u);
  EXPECT_EQ(ag.send_inplace_off, 250u);
  EXPECT_EQ(ag.recv_inplace_off, 0u);
  EXPECT_EQ(ag.bytes(4), 4000u);

  const Layout rs = layout_for(Coll::reduce_scatter, 1001, 4);
  EXPECT_EQ(rs.send_count, 1000u);
  EXPECT_EQ(rs.recv_count, 250u);
  EXPECT_EQ(rs.param_count, 250u);
  EXPECT_EQ(rs.send_inplace_off, 0u);
  EXPECT_EQ(rs.recv_inplace_off, 250u);
  EXPECT_EQ(rs.bytes(4), 4000u);

  const Layout a2a = layout_for(Coll::all_to_all, 1001, 4);
  EXPECT_EQ(a2a.send_count, 1000u);
  EXPECT_EQ(a2a.recv_count, 1000u);
  EXPECT_EQ(a2a.param_count, 250u);

  const Layout tiny = layout_for(Coll::all_gather, 2, 4);  // 8 B of float on 4 ranks
  EXPECT_EQ(tiny.param_count, 0u);
  EXPECT_EQ(tiny.bytes(4), 0u);
}

TEST(Bandwidth, BusFactorsMatchFormulas) {
  for (int n : {1, 2, 3, 4, 8, 16}) {
    const double d = n;
    EXPECT_DOUBLE_EQ(busbw_factor(Coll::all_reduce, n), 2 * (d - 1) / d);
    EXPECT_DOUBLE_EQ(busbw_factor(Coll::reduce_scatter, n), (d - 1) / d);
    EXPECT_DOUBLE_EQ(busbw_factor(Coll::all_gather, n), (d - 1) / d);
    EXPECT_DOUBLE_EQ(busbw_factor(Coll::all_to_all, n), (d - 1) / d);
    EXPECT_DOUBLE_EQ(busbw_factor(Coll::broadcast, n), 1.0);
    EXPECT_DOUBLE_EQ(busbw_factor(Coll::reduce, n), 1.0);
    EXPECT_DOUBLE_EQ(busbw_factor(Coll::sendrecv, n), 1.0);
    EXPECT_DOUBLE_EQ(busbw_factor(Coll::pipeline, n), 1.0);
  }
}

TEST(Bandwidth, AlgbwIsBytesOverTime) {
  const Bandwidth b = bandwidth(Coll::all_reduce, 1000000000, 0.5, 4);  // 1 GB in 0.5 s
  EXPECT_DOUBLE_EQ(b.algbw, 2.0);
  EXPECT_DOUBLE_EQ(b.busbw, 3.0);  // 2 * 2*3/4
  const Bandwidth z = bandwidth(Coll::broadcast, 100, 0.0, 2);
  EXPECT_EQ(z.algbw, 0.0);
}

TEST(Collective, Traits) {
  EXPECT_TRUE(has_op(Coll::all_reduce));
  EXPECT_TRUE(has_op(Coll::reduce_scatter));
  EXPECT_TRUE(has_op(Coll::reduce));
  EXPECT_FALSE(has_op(Coll::all_gather));
  EXPECT_TRUE(has_root(Coll::broadcast));
  EXPECT_TRUE(has_root(Coll::reduce));
  EXPECT_FALSE(has_root(Coll::all_reduce));
  EXPECT_FALSE(checks_in_place(Coll::all_to_all));
  EXPECT_FALSE(checks_in_place(Coll::sendrecv));
  EXPECT_FALSE(checks_in_place(Coll::pipeline));
  EXPECT_TRUE(checks_in_place(Coll::all_gather));
}

}  // namespace
}  // namespace perf
