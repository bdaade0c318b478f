// perf's facts on top of the library's tables, against counts written out here (nccl-tests'
// getCollByteCount and nccl's buffer sizes), not derived from the library's geometry.
#include <gtest/gtest.h>

#include "coll_printer.hpp"
#include "timed_op.hpp"

namespace perf {
namespace {

const Coll kAllReduce = Collective::all_reduce, kReduceScatter = Collective::reduce_scatter,
           kAllGather = Collective::all_gather, kBroadcast = Collective::broadcast, kReduce = Collective::reduce,
           kAllToAll = Collective::all_to_all, kSendrecv = P2p::sendrecv, kPipeline = P2p::pipeline;

TEST(CallCount, NcclTestsRule) {
  // A row of 1001 elements on 4 ranks: the per-rank-block collectives call with 250.
  for (const Coll& c : {kAllReduce, kBroadcast, kReduce, kSendrecv, kPipeline})
    EXPECT_EQ(call_count(c, 1001, 4), 1001u) << name(c);
  for (const Coll& c : {kReduceScatter, kAllGather, kAllToAll}) EXPECT_EQ(call_count(c, 1001, 4), 250u) << name(c);
  EXPECT_EQ(call_count(kAllGather, 2, 4), 0u);  // 8 B of float on 4 ranks
  EXPECT_EQ(call_count(kAllGather, 7, 1), 7u);
}

TEST(Buffers, WholeVectorOnEveryRank) {
  // Rooted collectives too: perf sizes and checks a non-root's buffers as the root's.
  for (const Coll& c : {kAllReduce, kBroadcast, kReduce, kSendrecv, kPipeline}) {
    for (int rank = 0; rank < 4; ++rank) {
      const strata::Geometry g = buffers(c, 1000, 4, rank);
      EXPECT_EQ(g.send_count, 1000u) << name(c) << " rank " << rank;
      EXPECT_EQ(g.recv_count, 1000u) << name(c) << " rank " << rank;
      EXPECT_EQ(g.in_place, strata::InPlace::same) << name(c);
    }
    EXPECT_EQ(row_bytes(c, 1000, 4, 4), 4000u) << name(c);
  }
}

TEST(Buffers, PerRankBlocks) {
  // 250 per rank on 4 ranks, seen from rank 2.
  const strata::Geometry ag = buffers(kAllGather, 250, 4, 2);
  EXPECT_EQ(ag.send_count, 250u);
  EXPECT_EQ(ag.recv_count, 1000u);
  EXPECT_EQ(ag.in_place, strata::InPlace::send_in_recv);
  EXPECT_EQ(ag.in_place_offset, 500u);

  const strata::Geometry rs = buffers(kReduceScatter, 250, 4, 2);
  EXPECT_EQ(rs.send_count, 1000u);
  EXPECT_EQ(rs.recv_count, 250u);
  EXPECT_EQ(rs.in_place, strata::InPlace::recv_in_send);
  EXPECT_EQ(rs.in_place_offset, 500u);

  const strata::Geometry a2a = buffers(kAllToAll, 250, 4, 2);
  EXPECT_EQ(a2a.send_count, 1000u);
  EXPECT_EQ(a2a.recv_count, 1000u);
  EXPECT_EQ(a2a.in_place, strata::InPlace::same);

  for (const Coll& c : {kAllGather, kReduceScatter, kAllToAll}) EXPECT_EQ(row_bytes(c, 250, 4, 4), 4000u) << name(c);
  EXPECT_EQ(row_bytes(kAllGather, 0, 4, 4), 0u);
}

TEST(Bandwidth, BusFactorsMatchFormulas) {
  for (int n : {1, 2, 3, 4, 8, 16}) {
    const double d = n;
    EXPECT_DOUBLE_EQ(busbw_factor(kAllReduce, n), 2 * (d - 1) / d);
    EXPECT_DOUBLE_EQ(busbw_factor(kReduceScatter, n), (d - 1) / d);
    EXPECT_DOUBLE_EQ(busbw_factor(kAllGather, n), (d - 1) / d);
    EXPECT_DOUBLE_EQ(busbw_factor(kAllToAll, n), (d - 1) / d);
    EXPECT_DOUBLE_EQ(busbw_factor(kBroadcast, n), 1.0);
    EXPECT_DOUBLE_EQ(busbw_factor(kReduce, n), 1.0);
    EXPECT_DOUBLE_EQ(busbw_factor(kSendrecv, n), 1.0);
    EXPECT_DOUBLE_EQ(busbw_factor(kPipeline, n), 1.0);
  }
}

TEST(Bandwidth, AlgbwIsBytesOverTime) {
  const Bandwidth b = bandwidth(kAllReduce, 1000000000, 0.5, 4);  // 1 GB in 0.5 s
  EXPECT_DOUBLE_EQ(b.algbw, 2.0);
  EXPECT_DOUBLE_EQ(b.busbw, 3.0);  // 2 * 2*3/4
  const Bandwidth z = bandwidth(kBroadcast, 100, 0.0, 2);
  EXPECT_EQ(z.algbw, 0.0);
}

TEST(Collective, Traits) {
  EXPECT_TRUE(has_op(kAllReduce));
  EXPECT_TRUE(has_op(kReduceScatter));
  EXPECT_TRUE(has_op(kReduce));
  EXPECT_FALSE(has_op(kAllGather));
  EXPECT_FALSE(has_op(kSendrecv));
  EXPECT_TRUE(has_root(kBroadcast));
  EXPECT_TRUE(has_root(kReduce));
  EXPECT_FALSE(has_root(kAllReduce));
  EXPECT_FALSE(has_root(kPipeline));
  EXPECT_FALSE(checks_in_place(kAllToAll));
  EXPECT_FALSE(checks_in_place(kSendrecv));
  EXPECT_FALSE(checks_in_place(kPipeline));
  EXPECT_TRUE(checks_in_place(kAllGather));
  EXPECT_TRUE(checks_in_place(kReduce));
}

TEST(Collective, NamesAndSpellings) {
  const std::vector<std::string> want = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                         "reduce",     "all_to_all",     "sendrecv",   "pipeline"};
  std::vector<std::string> got;
  for (const Coll& c : all_colls()) got.push_back(name(c));
  EXPECT_EQ(got, want);
  for (const std::string& n : want) {
    EXPECT_EQ(parse_coll(n).has_value() ? name(*parse_coll(n)) : "", n);
    EXPECT_EQ(parse_coll(n + "_perf"), parse_coll(n)) << n;
  }
  EXPECT_EQ(parse_coll("alltoall"), kAllToAll);
  EXPECT_EQ(parse_coll("alltoall_perf"), kAllToAll);
  EXPECT_EQ(parse_coll("send_recv"), kSendrecv);
  // The library's collectives that perf does not time, and near misses.
  for (const char* bad : {"barrier", "send", "recv", "allreduce", "_perf", "", "all_reduce_perf_perf"})
    EXPECT_FALSE(parse_coll(bad).has_value()) << bad;
}

TEST(Collective, PointToPointPeers) {
  // The ring shift wraps around; the pipeline's ends have no peer on one side.
  for (int n : {1, 2, 3, 5})
    for (int r = 0; r < n; ++r) {
      const P2pPeers ring = p2p_peers(P2p::sendrecv, r, n), chain = p2p_peers(P2p::pipeline, r, n);
      EXPECT_EQ(ring.send_to, (r + 1) % n) << r << "/" << n;
      EXPECT_EQ(ring.recv_from, (r + n - 1) % n) << r << "/" << n;
      EXPECT_EQ(chain.send_to, r + 1 < n ? r + 1 : -1) << r << "/" << n;
      EXPECT_EQ(chain.recv_from, r > 0 ? r - 1 : -1) << r << "/" << n;
    }
}

}  // namespace
}  // namespace perf
