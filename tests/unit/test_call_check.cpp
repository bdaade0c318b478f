// STRATA_CHECK's verdicts (core/call_check.hpp), without processes: which descriptions
// agree, what the message names, and whether every rank reaches the verdict by itself.
#include <gtest/gtest.h>

#include <vector>

#include "core/call_check.hpp"

using namespace strata;

namespace {

CallCheck coll(Collective c, size_t count, int root = 0, uint64_t seq = 4, DataType t = DataType::float32,
               ReduceOp op = ReduceOp::sum, Fault fault = Fault::none) {
  Call k;
  k.coll = c;
  k.count = count;
  k.root = root;
  k.type = t;
  k.op = op;
  k.fault = fault;
  return collective_check(k, seq);
}

CallCheck pair(std::vector<uint64_t> sends, std::vector<uint64_t> recvs, uint64_t sent_before = 0,
               uint64_t received_before = 0) {
  PairOps p;
  p.sends = std::move(sends);
  p.recvs = std::move(recvs);
  p.first_send_no = sent_before;
  p.first_recv_no = received_before;
  return pair_check(p, Fault::none);
}

}  // namespace

TEST(CallCheck, AgreeingCollectivesPassAndArgumentsACollectiveDoesNotTakeAreIgnored) {
  std::vector<CallCheck> all(3, coll(Collective::all_reduce, 1024));
  EXPECT_FALSE(collective_verdict(all).has_value());
  // all_gather takes no op and no root: ranks passing different ones still agree.
  all = {coll(Collective::all_gather, 8, 0, 1, DataType::int8, ReduceOp::sum),
         coll(Collective::all_gather, 8, 2, 1, DataType::int8, ReduceOp::max)};
  EXPECT_FALSE(collective_verdict(all).has_value());
}

TEST(CallCheck, DisagreementsNameWhichRanksPassedWhat) {
  std::vector<CallCheck> all(4, coll(Collective::broadcast, 10, 0));
  all[2] = coll(Collective::broadcast, 10, 3);
  auto v = collective_verdict(all);
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->everyone_knows);
  EXPECT_NE(v->message.find("ranks 0-1, 3 broadcast of 10 float from root 0"), std::string::npos) << v->message;
  EXPECT_NE(v->message.find("rank 2 broadcast of 10 float from root 3"), std::string::npos) << v->message;
  // Same call, another call number: a rank is a call behind.
  all.assign(2, coll(Collective::barrier, 1));
  all[1].seq = 5;
  ASSERT_TRUE(collective_verdict(all).has_value());
  // Types and ops.
  all = {coll(Collective::all_reduce, 4), coll(Collective::all_reduce, 4, 0, 4, DataType::float32, ReduceOp::max)};
  v = collective_verdict(all);
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->message.find("rank 1 all_reduce of 4 float (max)"), std::string::npos) << v->message;
}

TEST(CallCheck, ARefusalFailsTheCallEverywhere) {
  std::vector<CallCheck> all(3, coll(Collective::reduce, 64, 1));
  all[1].fault = static_cast<uint8_t>(Fault::overlap);
  auto v = collective_verdict(all);
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->everyone_knows);
  EXPECT_NE(v->message.find("every rank called reduce of 64 float (sum) to root 1"), std::string::npos) << v->message;
  EXPECT_NE(v->message.find("rank 1 refused its arguments (overlapping"), std::string::npos) << v->message;
}

// A rank in send/recv, or one that sent garbage: not every rank has every description,
// so the ranks that see it must tell the others.
TEST(CallCheck, ASendAmongCollectivesIsNotKnownEverywhere) {
  std::vector<CallCheck> all(3, coll(Collective::all_reduce, 4));
  all[0] = pair({16}, {});
  auto v = collective_verdict(all);
  ASSERT_TRUE(v.has_value());
  EXPECT_FALSE(v->everyone_knows);
  all[0] = CallCheck{};
  ASSERT_TRUE(collective_verdict(all).has_value());
  EXPECT_FALSE(collective_verdict(all)->everyone_knows);
  v = pair_verdict(pair({16}, {}), 0, coll(Collective::all_reduce, 4), 1);
  ASSERT_TRUE(v.has_value());
  EXPECT_FALSE(v->everyone_knows);
}

TEST(CallCheck, PairsAgreeOnSendsAgainstReceivesAndBothWordTheVerdictAlike) {
  // Rank 0 sends 100 then 8 bytes to rank 1 and receives 4; rank 1 the mirror image.
  EXPECT_FALSE(pair_verdict(pair({100, 8}, {4}, 3, 1), 0, pair({4}, {100, 8}, 1, 3), 1).has_value());
  // Another size.
  auto a = pair_verdict(pair({100, 8}, {4}), 0, pair({4}, {100, 9}), 1);
  auto b = pair_verdict(pair({4}, {100, 9}), 1, pair({100, 8}, {4}), 0);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->message, b->message);
  EXPECT_TRUE(a->everyone_knows);
  // Same sizes, but the pair disagrees on how many messages went before.
  EXPECT_TRUE(pair_verdict(pair({8}, {}, 2), 0, pair({}, {8}, 0, 3), 1).has_value());
  // A refusal on one side.
  CallCheck refused = pair({}, {8});
  refused.fault = static_cast<uint8_t>(Fault::null_buffer);
  a = pair_verdict(pair({8}, {}), 0, refused, 1);
  ASSERT_TRUE(a.has_value());
  EXPECT_NE(a->message.find("rank 1 refused its arguments (a null buffer)"), std::string::npos) << a->message;
}
