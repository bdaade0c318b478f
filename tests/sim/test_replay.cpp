// The replay of the library's plans against closed forms, and its engine semantics on
// hand-made plans (pairing in order, eager and waiting sends, forwards, errors).
#include <gtest/gtest.h>

#include <cmath>

#include "simulate.hpp"

namespace strata::sim {
namespace {

double simulate_time(const std::string& text, SimCall call, std::optional<Algo> algo, int iters = 1) {
  const Model m(parse_cluster(text, "test.cluster"));
  return simulate(m, call, algo, {0, iters}, false).replay.time_s;
}

SimCall all_reduce(size_t count, bool in_place = false) { return {Collective::all_reduce, count, DataType::float32, ReduceOp::sum, 0, in_place}; }

// Flat ring all_reduce with no link shared: 2(n-1) alpha + 2(n-1)/n S/beta. Both a
// shared-memory-like group (ports) and separate hosts (uplinks). Two ranks from 4 MiB run
// P = S / 1 MiB pieces, piece i's second half in the round of piece i+1's first: P + 1
// rounds, (P + 1) alpha + S/beta.
TEST(ClosedForm, FlatRingAllReduce) {
  const double alpha = 5e-6, beta = 10e9;
  for (int n : {2, 3, 8, 64, 256})
    for (size_t bytes : {size_t(1) << 20, size_t(64) << 20}) {
      const size_t count = bytes / 4 / n * n;  // blocks of equal size
      const double S = static_cast<double>(count) * 4;
      const double pieces = n == 2 && bytes >= (size_t(4) << 20) ? static_cast<double>(bytes >> 20) : 0;
      const double want = pieces ? (pieces + 1) * alpha + S / beta : 2 * (n - 1) * alpha + 2.0 * (n - 1) / n * S / beta;
      const std::string one_node = "level node size " + std::to_string(n) + " bandwidth 10GB/s latency 5us\n";
      const std::string hosts = "level host size 1 bandwidth 1TB/s latency 1us\nlevel net size " + std::to_string(n) +
                                " bandwidth 80Gbit/s latency 5us\n";
      for (const std::string& c : {one_node, hosts}) {
        const double got = simulate_time(c, all_reduce(count), Algo::ring);
        EXPECT_NEAR(got, want, 0.01 * want) << "n=" << n << " S=" << S << "\n" << c;
      }
    }
}

// Hierarchical all_reduce over K nodes of g ranks (below 4 MiB: not pipelined), each
// phase alone on its links:
//   copy S/c (out of place) + 2 (alpha0 + (g-1)/g S/beta0) + (g-1)/g S/gamma (owners reduce)
//   + 2(K-1)(alpha1 + S/(K B1))   (g rings of S/g, sharing each node's uplink B1)
TEST(ClosedForm, HierarchicalAllReduce) {
  const double a0 = 2e-6, b0 = 20e9, a1 = 10e-6, B1 = 5e9, copy = 8e9, gamma = 4e9;
  for (int g : {2, 4, 8})
    for (int K : {2, 3, 16}) {
      const std::string c = "copy 8GB/s\nreduce 4GB/s\nlevel node size " + std::to_string(g) +
                            " bandwidth 20GB/s latency 2us\nlevel net size " + std::to_string(K) +
                            " bandwidth 40Gbit/s latency 10us\n";
      const size_t count = (size_t(2) << 20) / 4 / (g * K) * (g * K);  // 2 MiB, equal blocks
      const double S = static_cast<double>(count) * 4, fg = (g - 1.0) / g;
      for (bool in_place : {false, true}) {
        const double want = (in_place ? 0 : S / copy) + 2 * (a0 + fg * S / b0) + fg * S / gamma +
                            2 * (K - 1) * (a1 + S / (K * B1));
        const double got = simulate_time(c, all_reduce(count, in_place), Algo::hierarchical);
        EXPECT_NEAR(got, want, 0.01 * want) << "g=" << g << " K=" << K << " in place " << in_place;
      }
    }
}

// Contention shows: a flat ring over nodes of 4 sends one flow per node across the
// network, the hierarchical plan four; halving the uplink slows the latter more.
TEST(Contention, AnOversubscribedUplinkSlowsTheHierarchicalPlan) {
  auto cluster = [](const char* spine) {
    return std::string("copy 1TB/s\nreduce 1TB/s\nlevel node size 4 bandwidth 100GB/s latency 1us\n"
                       "level leaf size 4 bandwidth 100Gbit/s latency 2us links 4\n"
                       "level spine size 4 bandwidth 100Gbit/s latency 3us ") + spine + "\n";
  };
  const SimCall call = all_reduce(size_t(1) << 20);  // 4 MiB
  const double full = simulate_time(cluster("oversubscription 1"), call, Algo::hierarchical);
  const double over = simulate_time(cluster("oversubscription 8"), call, Algo::hierarchical);
  EXPECT_GT(over, 1.3 * full);
}

// ---- the engine's semantics on hand-made plans ----

const char* kTwoHosts = "eager 1KB\nlevel host size 1 bandwidth 1TB/s latency 1us\nlevel net size 2 bandwidth 1GB/s latency 10us\n";

ReplayResult run_plans(const std::string& text, const std::vector<Plan>& plans, int iters = 1) {
  const Model m(parse_cluster(text, "test.cluster"));
  const SimCall call = all_reduce(1);
  const PlanSet set = compact_plans(m.cluster, call, [&](int r) { return plans[static_cast<size_t>(r)]; });
  return replay(m.fabric, set, {0, iters});
}

TEST(Engine, MessagesPairInPostingOrderPerDirection) {
  // Rank 0 sends 1000 then 3000 bytes in one round; rank 1 receives them in that order.
  Plan a, b;
  a.new_round();
  a.send(1, {Buf::input, 0}, 1000);
  a.send(1, {Buf::input, 0}, 3000);
  b.new_round();
  b.recv(0, {Buf::output, 0}, 1000);
  b.recv(0, {Buf::output, 0}, 3000);
  // One message at a time on the direction, each then a latency: the 16 KB arrive after
  // 16 us on the wire (the receive waits for the last).
  const ReplayResult r = run_plans(kTwoHosts, {a, b});
  EXPECT_NEAR(r.slowest_s, 16e-6 + 10e-6, 1e-12);
  EXPECT_EQ(r.messages, 2u);
}

TEST(Engine, SizesThatDifferAreAPlanError) {
  Plan a, b;
  a.new_round();
  a.send(1, {Buf::input, 0}, 1000);
  b.new_round();
  b.recv(0, {Buf::output, 0}, 999);
  try {
    run_plans(kTwoHosts, {a, b});
    FAIL() << "no error";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 sends 4000 bytes to rank 1, which receives 3996"), std::string::npos) << e.what();
  }
}

TEST(Engine, ADeadlockNamesTheRankAndRound) {
  // Both receive first, then send: each waits for the other.
  Plan p[2];
  for (int r = 0; r < 2; ++r) {
    p[r].new_round();
    p[r].recv(1 - r, {Buf::output, 0}, 10);
    p[r].new_round();
    p[r].send(1 - r, {Buf::input, 0}, 10);
  }
  try {
    run_plans(kTwoHosts, {p[0], p[1]});
    FAIL() << "no error";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 waits in round 0 of 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("a receive from rank 1 never came"), std::string::npos) << e.what();
  }
}

// Beyond the eager size a message waits for its receive; below it, it goes at once.
TEST(Engine, LargeMessagesWaitForTheirReceive) {
  for (size_t count : {size_t(100), size_t(1000)}) {  // 400 B (eager) and 4000 B
    Plan a, b;
    a.new_round();
    a.send(1, {Buf::input, 0}, count);
    b.new_round();
    b.copy({Buf::input, 0}, {Buf::output, 0}, 250000);  // 1 MB of local copying first: 167 us at 6 GB/s
    b.new_round();
    b.recv(0, {Buf::output, 0}, count);
    const ReplayResult r = run_plans(kTwoHosts, {a, b});
    const double copy = 1e6 / 6e9, wire = count * 4 / 1e9;
    const double want = count == 100 ? copy : copy + wire + 10e-6;  // eager: arrived while copying
    EXPECT_NEAR(r.slowest_s, want, 1e-12) << count;
  }
}

// With a buffer, a send completes once no more than the buffer of it is left to send.
TEST(Engine, ASendCompletesWhenTheRestFitsTheBuffer) {
  const char* buffered = "level host size 1 bandwidth 1TB/s latency 1us\nlevel net size 2 bandwidth 1GB/s latency 10us buffer 10KB\n";
  Plan a, b;
  a.new_round();
  a.send(1, {Buf::input, 0}, 3000);  // 12 KB: complete after 2 KB
  b.new_round();
  b.recv(0, {Buf::output, 0}, 3000);
  const ReplayResult r = run_plans(buffered, {a, b});
  EXPECT_NEAR(r.slowest_s, 12e-6 + 10e-6, 1e-12);
  EXPECT_NEAR(r.time_s, (2e-6 + 22e-6) / 2, 1e-12);
  EXPECT_EQ(r.messages, 1u);
}

// A rank spends its level's overhead on each send of a round, one after another: the round
// lasts at least that long; the flows leave at once.
TEST(Engine, ARoundLastsItsSendsOverheads) {
  const char* c = "level host size 1 bandwidth 1TB/s latency 1us\n"
                  "level net size 4 bandwidth 1GB/s latency 10us overhead 20us\n";
  Plan p[4];
  for (int r = 0; r < 4; ++r) {
    p[r].new_round();
    for (int k = 1; k < 4; ++k) {
      p[r].send((r + k) % 4, {Buf::input, 0}, 250);  // 1 KB: 1 us on the wire
      p[r].recv((r + 4 - k) % 4, {Buf::output, static_cast<size_t>(k) * 250}, 250);
    }
  }
  const ReplayResult posted = run_plans(c, {p[0], p[1], p[2], p[3]});
  EXPECT_NEAR(posted.slowest_s, 3 * 20e-6, 1e-12) << "three sends posted, 20 us each";
  const std::string cheap = std::string(c).replace(std::string(c).find("20us"), 4, "1us");
  const ReplayResult flying = run_plans(cheap.c_str(), {p[0], p[1], p[2], p[3]});
  EXPECT_NEAR(flying.slowest_s, 3e-6 + 10e-6, 1e-12) << "the wire and the latency, longer than 3 us of posting";
}

// recv_reduce_send: the forward leaves once its receive is done, after the sends before it.
TEST(Engine, AForwardWaitsForItsReceive) {
  const char* one_node = "eager 1KB\nlevel node size 2 bandwidth 1GB/s latency 1us forwards\n";
  Plan p[2];
  p[0].new_round();
  p[0].send(1, {Buf::input, 0}, 1000);  // 4 KB: 4 us + 1 us
  p[0].recv(1, {Buf::output, 0}, 1000);
  p[1].new_round();
  p[1].recv_reduce_send(0, {Buf::input, 0}, {Buf::output, 0}, 1000);
  const ReplayResult r = run_plans(one_node, {p[0], p[1]});
  EXPECT_NEAR(r.slowest_s, 2 * (4e-6 + 1e-6), 1e-12);
}

// Ranks with nothing to do (a send between two of four) wait at the barrier from the start.
TEST(Engine, IdleRanksDoNotHoldTheBarrier) {
  const char* four = "level host size 1 bandwidth 1TB/s latency 1us\nlevel net size 4 bandwidth 1GB/s latency 10us\n";
  Plan a, b;
  a.new_round();
  a.send(1, {Buf::input, 0}, 1000);
  b.new_round();
  b.recv(0, {Buf::output, 0}, 1000);
  const Model m(parse_cluster(four, "test.cluster"));
  const SimCall call = all_reduce(1);
  const std::vector<Plan> plans{a, b, Plan{}, Plan{}};
  const PlanSet set = compact_plans(m.cluster, call, [&](int r) { return plans[static_cast<size_t>(r)]; });
  const ReplayResult r = replay(m.fabric, set, {2, 1});  // after the barrier, one call alone
  EXPECT_NEAR(r.slowest_s, 4e-6 + 10e-6, 1e-12);
}

TEST(Engine, CallsRunBackToBack) {
  const std::string c = "level node size 8 bandwidth 10GB/s latency 5us\n";
  const SimCall call = all_reduce(size_t(1) << 20);
  const double one = simulate_time(c, call, Algo::ring, 1), five = simulate_time(c, call, Algo::ring, 5);
  EXPECT_NEAR(five, one, 1e-3 * one) << "the ring is symmetric: every call takes as long";
}

}  // namespace
}  // namespace strata::sim
