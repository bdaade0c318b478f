#include "simulate.hpp"

#include <chrono>

namespace strata::sim {

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::vector<Algo> applicable(const Model& m, const SimCall& call) {
  std::vector<Algo> out;
  const CollArgs a = coll_args(m.cluster, m.hierarchy, call, 0);
  for (Algo algo : kAllAlgos)
    if (supports(algo, call.coll) && (algo != Algo::hierarchical || hierarchy_splits(a))) out.push_back(algo);
  return out;
}

SideRun simulate(const Model& m, const SimCall& call, std::optional<Algo> forced, const ReplayOptions& o, bool prove) {
  SideRun run;
  auto t0 = std::chrono::steady_clock::now();
  run.choice = choose(m.cluster, m.hierarchy, call, forced);
  {
    const PlanSet plans = build_plan_set(m.cluster, m.hierarchy, call, run.choice);
    run.algo = plans.algo;
    run.steps = plans.steps;
    run.held_ranks = plans.nranks();
    run.connections_max = plans.connections_max;
    run.connections_mean = plans.connections_mean;
    run.compact_bytes = plans.memory_bytes();
    run.largest_plan_bytes = plans.largest_plan_bytes;
    run.build_s = since(t0);
    t0 = std::chrono::steady_clock::now();
    const bool folded = plans.period < m.cluster.nranks();
    run.replay = replay(folded ? Fabric(m.cluster, plans.period) : m.fabric, plans, o);
    run.replay_s = since(t0);
  }
  if (prove) {
    // The proof holds every rank's plan: a rotation does not prove the ranks it stands for.
    if (static_cast<double>(run.steps) * sizeof(Step) > kMaxPlanBytes)
      throw PlanTooLarge(std::string("-c 1 proves every rank's plan, ") + std::to_string(run.steps) +
                         " steps here: beyond strata-sim's budget; simulate fewer ranks (--ranks) to prove");
    run.proof = strata::sim::prove(m.cluster, m.hierarchy, call, run.choice);
  }
  return run;
}

}  // namespace strata::sim
