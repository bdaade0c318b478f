// Collective algorithms: each builds the plan one rank executes. They know nothing of
// transports or sockets.
#pragma once

#include <string>

#include "hierarchy.hpp"
#include "plan.hpp"

namespace strata {

enum class Collective { all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, barrier };
const char* name(Collective c);

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
};

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

}  // namespace strata
