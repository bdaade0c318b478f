// The scalable symbolic proof (perf/sim/proof.hpp): it accepts every plan the unit tests'
// exact proof accepts, rejects planted faults, and proves the plans of the example
// clusters at 1,024 and 16,384 ranks.
#include <gtest/gtest.h>

#include <chrono>

#include "proof.hpp"
#include "simulate.hpp"

namespace strata::sim {
namespace {

ProofInput library_plans(Algo algo, Collective coll, int n, size_t count, int root, bool in_place,
                         const Hierarchy* h = nullptr, size_t elem_size = 4) {
  ProofInput in{{coll, count, DataType::float32, ReduceOp::sum, root, in_place}, n, {}};
  for (int r = 0; r < n; ++r)
    in.plans.push_back(build_plan(algo, CollArgs{coll, count, elem_size, root, r, n, in_place, 3, h, false}));
  return in;
}

// The cases of tests/unit/test_plans.cpp (one in-place form for all ranks): every one passes.
TEST(Proof, AcceptsEveryPlanTheExactProofAccepts) {
  const Collective colls[] = {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
                              Collective::broadcast, Collective::reduce, Collective::all_to_all, Collective::barrier};
  int cases = 0;
  for (Collective coll : colls)
    for (Algo algo : kAllAlgos) {
      if (!supports(algo, coll) || algo == Algo::hierarchical) continue;
      for (int n = 1; n <= 9; ++n)
        for (size_t count : {size_t(1), size_t(2), size_t(5), size_t(13)})
          for (int root = 0; root < n; root += (n > 3 ? n - 1 : 1))
            for (bool in_place : {false, true}) {
              if (!info(coll).has_root && root) continue;
              const ProofResult r = prove_plans(library_plans(algo, coll, n, count, root, in_place));
              ASSERT_TRUE(r.ok) << name(coll) << "/" << name(algo) << " n=" << n << " count=" << count << ": " << r.failure;
              ++cases;
            }
    }
  for (const char* spec : {"node:2", "node:3", "node:2,island:2", "node:1,island:3", "node:2,rack:2,island:2"})
    for (int n = 2; n <= 9; ++n) {
      const Hierarchy h = build_hierarchy(std::vector<std::string>(static_cast<size_t>(n), "h"), parse_hierarchy_spec(spec), "");
      for (Collective coll : {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
                              Collective::broadcast, Collective::reduce})
        for (size_t count : {size_t(1), size_t(5), size_t(13)})
          for (size_t elem : {size_t(4), size_t(1) << 20})  // 1 MiB "elements": the pipelined pieces
            for (bool in_place : {false, true}) {
              const ProofResult r = prove_plans(library_plans(Algo::hierarchical, coll, n, count, n / 2, in_place, &h, elem));
              ASSERT_TRUE(r.ok) << name(coll) << " " << spec << " n=" << n << " count=" << count << ": " << r.failure;
              ++cases;
            }
    }
  EXPECT_GT(cases, 1500);
}

// Planted faults in correct plans: each must be caught, with its reason.
TEST(Proof, CatchesPlantedFaults) {
  const Hierarchy h = build_hierarchy(std::vector<std::string>(6, "h"), parse_hierarchy_spec("node:3"), "");
  auto ring = [] { return library_plans(Algo::ring, Collective::all_reduce, 5, 13, 0, false); };
  auto hier = [&] { return library_plans(Algo::hierarchical, Collective::all_reduce, 6, 13, 0, false, &h); };
  auto find = [](Plan& p, StepKind k) -> Step& {
    for (Step& s : p.steps)
      if (s.kind == k) return s;
    throw std::logic_error("no such step");
  };
  auto expect = [](const ProofInput& in, const std::string& why) {
    const ProofResult r = prove_plans(in);
    EXPECT_FALSE(r.ok) << why;
    EXPECT_NE(r.failure.find(why), std::string::npos) << r.failure;
  };
  {  // an owner skips one of its reductions: a contribution is missing
    ProofInput in = hier();
    Step& s = find(in.plans[0], StepKind::reduce);
    s.kind = StepKind::copy;
    expect(in, "contributions, not the expected 6");
  }
  {  // a reducing receive reads the output (nothing yet) instead of the input
    ProofInput in = ring();
    Step& s = find(in.plans[2], StepKind::recv_reduce);
    s.src = s.dst;
    expect(in, "4 contributions, not the expected 5");
  }
  {  // blocks put in each other's place: every element holds one contribution, the wrong one
    ProofInput in = library_plans(Algo::direct, Collective::all_gather, 3, 4, 0, false);
    std::vector<Step*> recvs;
    for (Step& s : in.plans[1].steps)
      if (s.kind == StepKind::recv) recvs.push_back(&s);
    ASSERT_EQ(recvs.size(), 2u);
    std::swap(recvs[0]->dst, recvs[1]->dst);
    expect(in, "rank 1's output element 0 holds other contributions than the expected 1");
  }
  {  // a contribution twice: a reduce repeated
    ProofInput in = hier();
    Plan& p = in.plans[0];
    const Step twice = find(p, StepKind::reduce);
    p.steps.insert(p.steps.begin() + p.round_begin[2], twice);
    for (size_t r = 3; r < p.round_begin.size(); ++r) ++p.round_begin[r];
    expect(in, "7 contributions, not the expected 6");
  }
  {  // transfers out of order: the sizes no longer pair
    ProofInput in = library_plans(Algo::direct, Collective::all_gather, 3, 4, 0, false);
    in.plans[0].steps.insert(in.plans[0].steps.begin() + 1, Step{StepKind::send, 1, {Buf::input, 0}, {}, 2});
    expect(in, "rank 0 sends 2 elements to rank 1, which receives 4 in that place");
  }
  {  // a step past its buffer
    ProofInput in = ring();
    find(in.plans[3], StepKind::send).count = 1000;
    expect(in, "rank 3's step");
  }
  {  // a round receiving into the memory it sends
    ProofInput in = ring();
    for (size_t i = in.plans[4].round_begin[1]; i < in.plans[4].round_end(1); ++i)
      if (in.plans[4].steps[i].kind == StepKind::recv_reduce) in.plans[4].steps[i].dst = in.plans[4].steps[in.plans[4].round_begin[1]].src;
    expect(in, "rank 4 receives into memory it sends from in the same round");
  }
  {  // a receive nobody sends
    ProofInput in = ring();
    in.plans[2].new_round();
    in.plans[2].recv(1, {Buf::output, 0}, 1);
    expect(in, "rank 2 deadlocked in round");
  }
}

// The example clusters at full size; their plans with the real 64 MiB counts (runs of
// equal content keep it small).
ProofResult prove_on(const Model& m, Collective coll, Algo algo, size_t count, bool in_place = false) {
  const SimCall call{coll, count, DataType::float32, ReduceOp::sum, 0, in_place};
  const auto t0 = std::chrono::steady_clock::now();
  const ProofResult r = prove(m.cluster, m.hierarchy, call, choose(m.cluster, m.hierarchy, call, algo));
  std::printf("  %d ranks, %s %s%s: %zu steps, at most %zu runs in one rank's memory, %.2f s\n", m.cluster.nranks(),
              name(coll), name(algo), in_place ? " in place" : "", r.steps, r.runs_peak,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return r;
}

const std::string kSuperpod = std::string(STRATA_SIM_CLUSTERS) + "/superpod-1k.cluster";

TEST(ProofAtScale, OneThousandTwentyFourRanks) {
  const Model m(load_cluster(kSuperpod));
  ASSERT_EQ(m.cluster.nranks(), 1024);
  const size_t count = (size_t(64) << 20) / 4;
  EXPECT_TRUE(prove_on(m, Collective::all_reduce, Algo::hierarchical, count).ok);
  EXPECT_TRUE(prove_on(m, Collective::all_reduce, Algo::hierarchical, count, true).ok);
  EXPECT_TRUE(prove_on(m, Collective::all_reduce, Algo::ring, count).ok);
  EXPECT_TRUE(prove_on(m, Collective::broadcast, Algo::hierarchical, count).ok);
  EXPECT_TRUE(prove_on(m, Collective::reduce, Algo::tree, count).ok);
  // One level (nodes only): the two-level reduce_scatter and all_gather, and the pipelined
  // all_reduce (4 MiB: 4 pieces, the count reduced to keep it to seconds).
  Cluster nodes = load_cluster(kSuperpod);
  nodes.hierarchy_all = false;
  const Model flat(std::move(nodes));
  EXPECT_TRUE(prove_on(flat, Collective::reduce_scatter, Algo::hierarchical, count / 1024).ok);
  EXPECT_TRUE(prove_on(flat, Collective::all_gather, Algo::hierarchical, count / 1024).ok);
  EXPECT_TRUE(prove_on(flat, Collective::all_reduce, Algo::hierarchical, (size_t(4) << 20) / 4).ok);
}

TEST(ProofAtScale, SixteenThousandThreeHundredEightyFourRanks) {
  Cluster c = load_cluster(kSuperpod);
  resize_cluster(c, 16384);
  const Model m(std::move(c));
  const ProofResult r = prove_on(m, Collective::all_reduce, Algo::hierarchical, (size_t(64) << 20) / 4);
  EXPECT_TRUE(r.ok) << r.failure;
}

}  // namespace
}  // namespace strata::sim
