// ibverbs flow control: a sender never has more chunks in the receiver's ring than it has
// slots, credit comes back cumulatively and out-of-date reports are harmless.
#include <gtest/gtest.h>

#include <random>

#include "transports/ibverbs/ib_credits.hpp"

using namespace strata::ibverbs;

TEST(IbCredits, SenderStopsAtTheWindow) {
  SendWindow w(4);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(w.can_send());
    EXPECT_EQ(w.next_slot(), i);
    EXPECT_TRUE(w.on_send());
  }
  EXPECT_FALSE(w.can_send());
  EXPECT_FALSE(w.on_send());  // refused, nothing changes
  EXPECT_EQ(w.sent(), 4u);
  EXPECT_TRUE(w.on_credit(1));
  EXPECT_TRUE(w.can_send());
  EXPECT_EQ(w.next_slot(), 0u);  // wraps to the slot just freed
  EXPECT_TRUE(w.on_send());
  EXPECT_FALSE(w.can_send());
}

TEST(IbCredits, StaleCreditIsIgnoredAndImpossibleCreditRefused) {
  SendWindow w(2);
  w.on_send();
  w.on_send();
  EXPECT_TRUE(w.on_credit(2));
  EXPECT_TRUE(w.on_credit(1));  // an older report arriving late
  EXPECT_EQ(w.consumed(), 2u);
  EXPECT_FALSE(w.on_credit(3));  // more than was ever sent
  EXPECT_EQ(w.consumed(), 2u);
}

TEST(IbCredits, ReceiverDetectsOverrun) {
  RecvWindow r(2, 1);
  EXPECT_TRUE(r.on_arrival());
  EXPECT_TRUE(r.on_arrival());
  EXPECT_FALSE(r.on_arrival());  // a third chunk with both slots full
  EXPECT_TRUE(r.on_consume());
  EXPECT_TRUE(r.on_arrival());
  EXPECT_EQ(r.next_slot(), 1u);
}

TEST(IbCredits, ReportsAreBatchedOneInFlightAndForcedWhenIdle) {
  RecvWindow r(8, 4);
  for (int i = 0; i < 8; ++i) r.on_arrival();
  for (int i = 0; i < 3; ++i) r.on_consume();
  EXPECT_FALSE(r.take_report(false).has_value());  // below the batch
  EXPECT_TRUE(r.owes());
  r.on_consume();
  auto v = r.take_report(false);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, 4u);
  EXPECT_FALSE(r.owes());
  for (int i = 0; i < 4; ++i) r.on_consume();
  EXPECT_FALSE(r.take_report(true).has_value());  // one report in flight at a time
  EXPECT_TRUE(r.report_in_flight());
  r.on_report_done();
  v = r.take_report(false);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, 8u);
  r.on_report_done();
  r.on_arrival();
  r.on_consume();
  v = r.take_report(true);  // forced: a single owed chunk goes out
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, 9u);
  EXPECT_FALSE(r.on_consume());  // nothing left
}

// A random schedule of sends, deliveries, consumption and (possibly delayed, reordered)
// credit reports never lets the sender overrun the ring, and never deadlocks: once the
// receiver consumes everything and reports, the sender can send the whole window again.
TEST(IbCredits, RandomScheduleNeverOverruns) {
  std::mt19937 rng(12345);
  for (uint32_t slots : {1u, 2u, 3u, 8u}) {
    SendWindow s(slots);
    RecvWindow r(slots, std::max(1u, slots / 4));
    uint64_t on_wire = 0, delivered_reports = 0;
    std::vector<uint64_t> reports_in_flight;
    const uint64_t total = 5000;
    uint64_t consumed_total = 0;
    for (int step = 0; step < 200000 && consumed_total < total; ++step) {
      switch (rng() % 5) {
        case 0:
          if (s.sent() < total && s.on_send()) ++on_wire;
          break;
        case 1:
          if (on_wire) {
            ASSERT_TRUE(r.on_arrival()) << "overrun with " << slots << " slots";
            --on_wire;
          }
          break;
        case 2:
          if (r.on_consume()) ++consumed_total;
          break;
        case 3:
          if (auto v = r.take_report(rng() % 2 == 0)) reports_in_flight.push_back(*v);
          break;
        case 4:
          if (!reports_in_flight.empty()) {
            size_t i = rng() % reports_in_flight.size();
            ASSERT_TRUE(s.on_credit(reports_in_flight[i]));
            reports_in_flight.erase(reports_in_flight.begin() + static_cast<long>(i));
            r.on_report_done();
            ++delivered_reports;
          }
          break;
      }
      ASSERT_LE(s.in_flight(), slots);
    }
    EXPECT_EQ(consumed_total, total) << slots << " slots: stalled";
    EXPECT_GT(delivered_reports, 0u);
  }
}
