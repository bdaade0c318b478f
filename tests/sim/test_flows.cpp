// The flow network against hand-computed max-min fair shares and token-bucket times.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "flows.hpp"

namespace strata::sim {
namespace {

// Runs the network to the end; returns each tag's completion time.
std::map<uint32_t, double> finish_times(FlowNetwork& net) {
  std::map<uint32_t, double> out;
  std::vector<FlowNetwork::Tag> done;
  double now = 0;
  for (double t; (t = net.next_time(now)) != HUGE_VAL; now = t) {
    done.clear();
    net.complete_until(t, done);
    for (auto tag : done) out[tag] = t;
  }
  return out;
}

TEST(Flows, OneFlowRunsAtItsBottleneck) {
  FlowNetwork net(std::vector<LinkSpec>{{10}, {4}, {8}});
  const uint32_t path[] = {0, 1, 2};
  net.add(path, 3, 100, 0, 7);
  EXPECT_DOUBLE_EQ(finish_times(net).at(7), 25.0);  // 100 bytes at 4
}

// The textbook case: f1 crosses A (cap 10) alone after f2 is held to 4 by B.
TEST(Flows, MaxMinGivesWhatABottleneckedFlowLeaves) {
  FlowNetwork net(std::vector<LinkSpec>{{10}, {4}});
  const uint32_t a[] = {0}, ab[] = {0, 1};
  net.add(a, 1, 60, 0, 1);   // f1: A only
  net.add(ab, 2, 40, 0, 2);  // f2: A and B
  auto t = finish_times(net);
  EXPECT_DOUBLE_EQ(t.at(2), 10.0);  // 4/s
  EXPECT_DOUBLE_EQ(t.at(1), 10.0);  // 6/s: what A has left
}

TEST(Flows, RatesAreRecomputedWhenAFlowLeaves) {
  FlowNetwork net(std::vector<LinkSpec>{{10}});
  const uint32_t a[] = {0};
  net.add(a, 1, 100, 0, 1);
  net.add(a, 1, 200, 0, 2);
  auto t = finish_times(net);
  EXPECT_DOUBLE_EQ(t.at(1), 20.0);  // 5/s each
  EXPECT_DOUBLE_EQ(t.at(2), 30.0);  // then 10/s for the last 100
}

TEST(Flows, AFlowArrivingLaterTakesItsShareFromThen) {
  FlowNetwork net(std::vector<LinkSpec>{{10}});
  const uint32_t a[] = {0};
  net.add(a, 1, 100, 0, 1);
  std::vector<FlowNetwork::Tag> done;
  EXPECT_DOUBLE_EQ(net.next_time(0), 10.0);
  net.complete_until(4, done);  // nothing due yet; 60 bytes left at t=4
  net.add(a, 1, 30, 4, 2);
  EXPECT_DOUBLE_EQ(net.next_time(4), 10.0);  // both at 5/s: the new one ends at 4 + 6
  net.complete_until(10, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0], 2u);
  EXPECT_DOUBLE_EQ(net.next_time(10), 13.0);  // 30 left at 10/s
}

TEST(Flows, ManyFlowsShareEvenly) {
  FlowNetwork net(std::vector<LinkSpec>{{12}, {100}, {100}, {100}});
  for (uint32_t i = 0; i < 3; ++i) {
    const uint32_t p[] = {0, 1 + i};
    net.add(p, 2, 40, 0, i);
  }
  for (auto [tag, t] : finish_times(net)) EXPECT_DOUBLE_EQ(t, 10.0) << tag;
}

// tbf: with tokens the link runs at peak; the bucket drains at peak - rate.
TEST(Flows, TokenBucketLetsABurstThroughAtPeak) {
  const double rate = 100, burst = 50, peak = 1000;
  {
    FlowNetwork net(std::vector<LinkSpec>{{rate, burst, peak}});
    const uint32_t a[] = {0};
    net.add(a, 1, 20, 0, 1);
    EXPECT_DOUBLE_EQ(finish_times(net).at(1), 20 / peak);  // within the burst
  }
  {
    FlowNetwork net(std::vector<LinkSpec>{{rate, burst, peak}});
    const uint32_t a[] = {0};
    net.add(a, 1, 500, 0, 1);
    const double dry = burst / (peak - rate), sent = peak * dry;
    EXPECT_NEAR(finish_times(net).at(1), dry + (500 - sent) / rate, 1e-12);
  }
}

TEST(Flows, TokenBucketRefillsWhileIdle) {
  const double rate = 100, burst = 50, peak = 1000;
  FlowNetwork net(std::vector<LinkSpec>{{rate, burst, peak}});
  const uint32_t a[] = {0};
  net.add(a, 1, 500, 0, 1);
  auto t = finish_times(net);  // leaves the bucket empty
  const double end = t.at(1);
  // 0.2 s idle refills 20 bytes of tokens: a 20-byte flow then goes at peak.
  net.add(a, 1, 20, end + 0.2, 2);
  std::vector<FlowNetwork::Tag> done;
  EXPECT_NEAR(net.next_time(end + 0.2), end + 0.2 + 20 / peak, 1e-9);
}

TEST(Flows, UseRecordsBytesAndTheBusiestMoment) {
  FlowNetwork net(std::vector<LinkSpec>{{10}, {10}});
  const uint32_t a[] = {0}, ab[] = {0, 1};
  net.add(a, 1, 30, 0, 1);
  net.add(ab, 2, 30, 0, 2);
  finish_times(net);
  EXPECT_DOUBLE_EQ(net.use()[0].bytes, 60);
  EXPECT_DOUBLE_EQ(net.use()[1].bytes, 30);
  EXPECT_DOUBLE_EQ(net.use()[0].peak_used_Bps, 10);
  EXPECT_EQ(net.use()[0].peak_flows, 2);
  EXPECT_DOUBLE_EQ(net.use()[1].peak_used_Bps, 5);
}

}  // namespace
}  // namespace strata::sim
