// The symbolic proof of tests/unit/test_plans.cpp, at any scale: every rank's plan is
// replayed together with no processes, every element carrying the multiset of (rank,
// index) contributions it holds, and every output element must hold each expected
// contribution exactly once; transfers must pair up in order with equal sizes, nothing
// may deadlock, no step may leave its buffer, and no round may receive into memory it
// sends or reads, or receive twice into the same memory.
//
// What makes it scale: a buffer is a list of runs of elements with equal content (a plan
// moves blocks, so a rank's buffers hold a few hundred runs, not millions of elements),
// and a run's multiset is a fingerprint, not a list. Contribution (q, i) held at position
// x is k_q * g^(i - x) modulo the prime 2^61 - 1, with a random key k_q per rank and a
// random g; a multiset is the sum of its members' terms and their number. Moving a run
// from position s to t multiplies by g^(s - t), a reduction adds. A wrong multiset has a
// fingerprint that is a nonzero polynomial in the keys and g, so it equals the expected
// one with probability below 2^-30 (Schwartz-Zippel), and the seed is printed to redo it.
#pragma once

#include <cstdint>
#include <string>

#include "cluster.hpp"
#include "plan_set.hpp"

namespace strata::sim {

struct ProofResult {
  bool ok = true;
  int wrong_ranks = 0;   // ranks with an output element that does not hold what it should
  std::string failure;   // the first thing found wrong
  size_t steps = 0;
  size_t runs_peak = 0;  // the most runs held at once over all ranks
};

// Proves the plans the library builds for `call` with `choice` on every rank of `c`.
// Structural faults (sizes that differ, a deadlock, a step out of bounds, overlapping
// transfers) fail it with `failure` set; wrong contents count `wrong_ranks`.
ProofResult prove(const Cluster& c, const Hierarchy& h, const SimCall& call, const PlanChoice& choice,
                  uint64_t seed = 1);

// The same over plans given directly (tests: planted faults).
struct ProofInput {
  SimCall call;
  int nranks;
  std::vector<Plan> plans;
};
ProofResult prove_plans(const ProofInput& in, uint64_t seed = 1);

}  // namespace strata::sim
