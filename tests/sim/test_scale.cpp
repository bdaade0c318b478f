// strata-sim at scale: plans folded by rotation symmetry replay exactly as every rank's
// plans do; a false claim of symmetry is caught; a plan quadratic by nature is refused
// before it is built, with a message that says why.
#include <gtest/gtest.h>

#include "simulate.hpp"

namespace strata::sim {
namespace {

// Three levels (nodes of 4, leaves of 3 nodes, 4 leaves), an oversubscribed spine and a
// token bucket on the leaves' uplinks, so that flows share links and rates change.
const char* kFabric =
    "level node size 4 bandwidth 100GB/s latency 2us buffer 1MB\n"
    "level leaf size 3 bandwidth 25GB/s latency 5us links 2 burst 2MB peak 60GB/s\n"
    "level spine size 4 bandwidth 25GB/s latency 9us oversubscription 2\n";

TEST(Fold, FoldedPlansReplayAsEveryRanksPlans) {
  int folded = 0;
  for (const char* told : {"hierarchy nodes\n", "hierarchy all\n"}) {
    const Model m(parse_cluster(std::string(told) + kFabric, "fold.cluster"));
    const int n = m.cluster.nranks();
    ASSERT_EQ(n, 48);
    for (Collective coll : {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather})
      for (Algo algo : {Algo::ring, Algo::direct, Algo::recursive_doubling, Algo::hierarchical})
        for (size_t bytes : {size_t(96) << 10, size_t(48) << 20}) {
          if (!supports(algo, coll)) continue;
          const size_t count = coll == Collective::all_reduce ? bytes / 4 : bytes / 4 / n;
          const SimCall call{coll, count, DataType::float32, ReduceOp::sum, 0, false};
          const PlanChoice choice = choose(m.cluster, m.hierarchy, call, algo);
          const PlanSet fold = build_plan_set(m.cluster, m.hierarchy, call, choice);
          const std::string what = std::string(told) + name(algo) + " " + name(coll) + " " + std::to_string(bytes) + " B";
          if (fold.period == n) continue;  // no symmetry claimed here
          ++folded;
          EXPECT_EQ(fold.period, 12) << what << ": the fabric's period, a leaf";
          const PlanSet all = compact_plans(m.cluster, call, [&](int r) {
            CollArgs a = choice.args;
            a.rank = r;
            return build_plan(choice.algo, a);
          });
          ASSERT_EQ(all.period, n);
          // Counted on the held ranks: Bruck's rank 0 makes one local copy where the others make two.
          EXPECT_NEAR(static_cast<double>(fold.steps), static_cast<double>(all.steps), n) << what;
          const ReplayOptions o{1, 2};
          const ReplayResult a = replay(m.fabric, all, o), b = replay(Fabric(m.cluster, fold.period), fold, o);
          EXPECT_NEAR(b.time_s, a.time_s, 1e-9 * a.time_s) << what;
          EXPECT_NEAR(b.slowest_s, a.slowest_s, 1e-9 * a.slowest_s) << what;
          EXPECT_EQ(b.messages, a.messages) << what;
          ASSERT_EQ(a.levels.size(), b.levels.size());
          for (size_t i = 0; i < a.levels.size(); ++i) {
            EXPECT_EQ(b.levels[i].links, a.levels[i].links) << what << " level " << i;
            EXPECT_EQ(b.levels[i].links_used, a.levels[i].links_used) << what << " level " << i;
            EXPECT_NEAR(b.levels[i].bytes_max, a.levels[i].bytes_max, 1e-6 * a.levels[i].bytes_max + 1) << what;
            EXPECT_NEAR(b.levels[i].bytes_mean, a.levels[i].bytes_mean, 1e-6 * a.levels[i].bytes_mean + 1) << what;
            EXPECT_NEAR(b.levels[i].peak_Bps, a.levels[i].peak_Bps, 1e-6 * a.levels[i].peak_Bps) << what;
          }
        }
  }
  EXPECT_GE(folded, 14) << "the rings, direct, Bruck's and the hierarchical plans should have folded";
}

// Hand-made plans that claim a period of 2 where rank 2 differs from rank 0.
TEST(Fold, AFalseClaimIsCaught) {
  const Cluster c = parse_cluster("level node size 2 bandwidth 1GB/s latency 1us\nlevel net size 3 bandwidth 1GB/s latency 1us\n", "c");
  const SimCall call{Collective::all_gather, 4, DataType::float32, ReduceOp::sum, 0, false};
  auto ring = [&](int r) {
    Plan p;
    p.algo = "ring";
    p.new_round();
    p.send((r + 1) % 6, {Buf::output, 0}, r == 2 ? 2 : 4);  // rank 2 sends less
    p.recv((r + 5) % 6, {Buf::output, 4}, r == 3 ? 2 : 4);
    return p;
  };
  try {
    compact_plans(c, call, ring, 2);
    FAIL() << "the claim should have been checked";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "ring all_gather: rank 2's plan is not rank 0's moved on by 2 ranks, as algorithms/ claims "
                           "(rotation_period)");
  }
}

// The tuner against the simulator on a small superpod (4 scalable units of 4 nodes of 8
// GPUs, told its figures): for every collective and size its choice is within 10% of the
// fastest algorithm simulated, and its prediction of that choice within a factor 2 of the
// simulation (the model is coarser for Bruck's and the direct exchange than for the rest).
// perf/sim_tuner_table.py runs the same at 1,024 and 16,384 ranks.
TEST(Tuner, ChoosesWithin10PercentOfTheFastestSimulated) {
  const Model m(parse_cluster("link_model cluster\nmemory device\ncopy 1.5TB/s\nreduce 1TB/s\n"
                              "level node size 8 bandwidth 450GB/s latency 3us\n"
                              "level su size 4 bandwidth 400Gbit/s latency 6us links 8 overhead 1us\n"
                              "level spine size 4 bandwidth 400Gbit/s latency 8us oversubscription 1 overhead 1us\n",
                              "pod.cluster"));
  const int n = m.cluster.nranks();
  for (Collective coll : {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather})
    for (size_t bytes : {size_t(64) << 10, size_t(4) << 20, size_t(256) << 20}) {
      const size_t count = coll == Collective::all_reduce ? bytes / 4 : bytes / 4 / n;
      const SimCall call{coll, count, DataType::float32, ReduceOp::sum, 0, false};
      const PlanChoice tuned = choose(m.cluster, m.hierarchy, call, std::nullopt);
      double fastest = HUGE_VAL, mine = 0;
      std::string best;
      for (Algo a : applicable(m, call)) {
        const double t = simulate(m, call, a, {0, 1}, false).replay.time_s;
        if (t < fastest) fastest = t, best = name(a);
        if (a == tuned.algo) mine = t;
      }
      const std::string what = std::string(name(coll)) + " " + std::to_string(bytes) + " B: the tuner picks " +
                               name(tuned.algo) + ", the fastest is " + best;
      EXPECT_LE(mine, 1.10 * fastest) << what;
      EXPECT_GT(tuned.predicted_s, mine / 2) << what;
      EXPECT_LT(tuned.predicted_s, mine * 2) << what;
    }
}

TEST(Fold, DirectAt16kRanksIsRefusedWithWhy) {
  Cluster c = load_cluster(std::string(STRATA_SIM_CLUSTERS) + "/superpod-1k.cluster");
  resize_cluster(c, 16384);
  const Model m(std::move(c));
  const SimCall call{Collective::all_reduce, size_t(16) << 20, DataType::float32, ReduceOp::sum, 0, false};
  try {
    simulate(m, call, Algo::direct, {0, 1}, false);
    FAIL() << "direct at 16,384 ranks should be refused";
  } catch (const PlanTooLarge& e) {
    EXPECT_STREQ(e.what(),
                 "direct all_reduce on 16384 ranks: a rank's plan has 32766 transfers in 1 round, up to 32766 at once; "
                 "over the 256 ranks simulated (the rest by rotation symmetry) that is 134 MB of plans and 8.4 million "
                 "transfers in flight, beyond strata-sim's budget (1.1 GB, 4.0 million): every rank talks to every other "
                 "at once, which grows with the square of the ranks; simulate fewer ranks (--ranks)");
  }
}

}  // namespace
}  // namespace strata::sim
