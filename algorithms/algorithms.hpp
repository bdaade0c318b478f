// Collective algorithms: each builds the plan one rank executes. They know nothing of
// transports or sockets.
#pragma once

#include <string>
#include <vector>

#include "algorithms/hierarchy.hpp"
#include "ground/memory_kind.hpp"
#include "ground/plan.hpp"
#include "strata/collective.hpp"

namespace strata {


enum class Algo { ring, tree, recursive_doubling, direct, hierarchical, rabenseifner };
// In the tuner's order of preference when predictions tie.
inline constexpr Algo kAllAlgos[] = {Algo::ring, Algo::tree, Algo::direct, Algo::recursive_doubling, Algo::rabenseifner,
                                     Algo::hierarchical};
const char* name(Algo a);

// What every rank knows about one call. `count` is per the API: all_reduce, broadcast,
// reduce: the vector; reduce_scatter: the output block; all_gather: the input block;
// all_to_all: the block sent to each rank.
struct CollArgs {
  Collective coll;
  size_t count;
  size_t elem_size;
  int root;
  int rank;
  int nranks;
  bool in_place;       // input and output are the same memory (in NCCL's sense)
  size_t chunk_count;  // pipelining unit, in elements
  const Hierarchy* hier = nullptr;  // for hierarchical plans; null or one group: flat
  // The links forward reductions and the op has no finalize step: plans may use
  // recv_reduce_send. Every rank of the call must see the same value.
  bool forward = false;
  MemoryKind memory = MemoryKind::host;  // the tuner's link models depend on it
};

// Power-of-two folding, as recursive doubling and Rabenseifner use it: the ranks taking
// part are p = the largest power of two <= n; each of the first n - p pairs (2i, 2i+1)
// folds into its odd member beforehand, which hands the result back at the end.
struct Fold {
  int pow2 = 1, rem = 0;
  explicit Fold(int n) {
    while (pow2 * 2 <= n) pow2 *= 2;
    rem = n - pow2;
  }
  bool paired(int r) const { return r < 2 * rem; }
  // Rank r's index among the ranks taking part, or -1 (it folds into r + 1).
  int member(int r) const { return paired(r) ? (r % 2 ? r / 2 : -1) : r - rem; }
  int rank_of(int member) const { return member < rem ? 2 * member + 1 : member + rem; }
  // The last round: the odd member of a pair sends the result back to the even one.
  void hand_back(Plan& p, int r, Ref out, size_t count) const {
    if (!paired(r)) return;
    p.new_round();
    if (r % 2 == 0) p.recv(r + 1, out, count);
    else p.send(r - 1, out, count);
  }
};

// One point-to-point transfer of a group (group_start ... group_end) on this rank.
struct P2POp {
  bool is_send;
  char* buf;
  size_t bytes;
  int peer;
};
// A group as one round: every transfer is posted at once. Sends to self meet receives
// from self in the order they were posted and become copies (InvalidArgument when their
// numbers or sizes differ).
Plan p2p_plan(const std::vector<P2POp>& ops, int rank);

// Whether `algo` implements `coll`.
bool supports(Algo algo, Collective coll);
// The algorithm used when none is forced, by message size.
Algo default_algo(const CollArgs& a);
Plan build_plan(Algo algo, const CollArgs& a);

// One builder per algorithm family (algorithms/*.cpp).
Plan ring_plan(const CollArgs& a);
Plan tree_plan(const CollArgs& a);
Plan recursive_doubling_plan(const CollArgs& a);
Plan rabenseifner_plan(const CollArgs& a);
Plan direct_plan(const CollArgs& a);
Plan hierarchical_plan(const CollArgs& a);
// The hierarchy has levels that separate this call's ranks (else hierarchical = ring).
bool hierarchy_splits(const CollArgs& a);
// The hierarchical plan for this call is the ring's: the hierarchy does not split the ranks,
// or all_gather / reduce_scatter without one level of equal nodes of consecutive ranks.
bool hierarchical_is_ring(const CollArgs& a);

// Rotation symmetry, for strata-sim at scale: the smallest s > 0 such that rank r + s's plan
// is rank r's with every peer moved on by s (mod n) — the same rounds, transfers of the
// same sizes to the shifted peers in the same order, local passes over as many elements —
// or 0 where no such s is claimed. Claimed where it holds by construction (rings over equal
// blocks, Bruck's all_gather, direct; hierarchical plans over equal nodes of consecutive
// ranks whose inner algorithms are those); tests/unit/test_plans.cpp checks every claim
// plan by plan.
int rotation_period(Algo algo, const CollArgs& a);
int hierarchical_rotation_period(const CollArgs& a);  // rotation_period's case of hierarchical

}  // namespace strata
