// One simulated call: the library's plans for every rank, replayed over the cluster, and
// optionally proven (strata-sim -c 1).
#pragma once

#include <optional>
#include <string>

#include "fabric.hpp"
#include "plan_set.hpp"
#include "proof.hpp"
#include "replay.hpp"

namespace strata::sim {

// A cluster with what is derived from it once: the hierarchy the library sees, the links.
struct Model {
  explicit Model(Cluster c) : cluster(std::move(c)), hierarchy(cluster.hierarchy()), fabric(cluster) {}
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Cluster cluster;
  const Hierarchy hierarchy;
  const Fabric fabric;  // refers to `cluster`
};

struct SideRun {
  PlanChoice choice;
  std::string algo;  // the plan's own name
  ReplayResult replay;
  size_t steps = 0;             // plan steps over all ranks
  int held_ranks = 0;           // ranks whose plans were held (fewer: folded by rotation symmetry)
  int connections_max = 0;      // per rank by the first call (PlanSet)
  double connections_mean = 0;
  size_t compact_bytes = 0;     // the plans as the replay holds them
  size_t largest_plan_bytes = 0;
  double build_s = 0, replay_s = 0;  // wall time spent
  std::optional<ProofResult> proof;
};

// Algorithms that apply to `call` on this cluster: the ones that implement it, and
// hierarchical only where the hierarchy separates the ranks.
std::vector<Algo> applicable(const Model& m, const SimCall& call);

SideRun simulate(const Model& m, const SimCall& call, std::optional<Algo> forced, const ReplayOptions& o, bool prove);

}  // namespace strata::sim
