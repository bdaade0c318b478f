#include <iterator>

#include "algorithms/algorithms.hpp"
#include "strata/error.hpp"

namespace strata {

const char* name(Algo a) {
  // Indexed by Algo: the one list of algorithm names (STRATA_ALGO, logs, plans).
  static constexpr const char* names[] = {"ring", "tree", "recursive_doubling", "direct", "hierarchical", "rabenseifner"};
  const auto i = static_cast<size_t>(a);
  return i < std::size(names) ? names[i] : "?";
}

bool supports(Algo algo, Collective coll) {
  switch (algo) {
    case Algo::ring:
      return coll == Collective::all_reduce || coll == Collective::reduce_scatter || coll == Collective::all_gather ||
             coll == Collective::broadcast || coll == Collective::reduce;
    case Algo::tree: return coll == Collective::broadcast || coll == Collective::reduce;
    case Algo::recursive_doubling: return coll == Collective::all_reduce || coll == Collective::all_gather;
    case Algo::rabenseifner: return coll == Collective::all_reduce;
    case Algo::direct:
      return coll == Collective::all_reduce || coll == Collective::reduce_scatter || coll == Collective::all_gather ||
             coll == Collective::all_to_all || coll == Collective::barrier;
    case Algo::hierarchical:
      return coll == Collective::all_reduce || coll == Collective::reduce_scatter || coll == Collective::all_gather ||
             coll == Collective::broadcast || coll == Collective::reduce;
  }
  return false;
}

Algo default_algo(const CollArgs& a) {
  // Bytes that cross the busiest link in the bandwidth-optimal algorithm.
  size_t bytes = a.count * a.elem_size;
  switch (a.coll) {
    case Collective::all_reduce:
      if (bytes <= 4096 && a.nranks <= 4) return Algo::direct;
      return bytes < (64 << 10) ? Algo::recursive_doubling : Algo::ring;
    case Collective::reduce_scatter:
    case Collective::all_gather:
      return bytes * static_cast<size_t>(a.nranks) < (64 << 10) ? Algo::direct : Algo::ring;
    case Collective::broadcast:
    case Collective::reduce:
      return bytes < (64 << 10) ? Algo::tree : Algo::ring;
    case Collective::all_to_all:
    case Collective::barrier:
    case Collective::send:
    case Collective::recv:
      return Algo::direct;
  }
  return Algo::ring;
}

int rotation_period(Algo algo, const CollArgs& a) {
  if (!supports(algo, a.coll)) return 0;
  switch (algo) {
    case Algo::ring:
      switch (a.coll) {
        // Rank r sends block r - s in step s; blocks of equal size (two ranks cut pieces).
        case Collective::all_reduce: return a.nranks != 2 && a.count % static_cast<size_t>(a.nranks) == 0 ? 1 : 0;
        case Collective::reduce_scatter:
        case Collective::all_gather: return 1;
        default: return 0;  // chains from or to the root
      }
    case Algo::recursive_doubling: return a.coll == Collective::all_gather ? 1 : 0;  // Bruck's: to r - d, from r + d
    case Algo::direct: return 1;  // to r + k, from r - k
    case Algo::hierarchical: return hierarchical_rotation_period(a);
    case Algo::tree:
    case Algo::rabenseifner: return 0;  // rooted, or partners by exclusive or
  }
  return 0;
}

Plan build_plan(Algo algo, const CollArgs& a) {
  if (!supports(algo, a.coll))
    throw InternalError(std::string("algorithm ") + name(algo) + " does not implement " + name(a.coll));
  switch (algo) {
    case Algo::ring: return ring_plan(a);
    case Algo::tree: return tree_plan(a);
    case Algo::recursive_doubling: return recursive_doubling_plan(a);
    case Algo::direct: return direct_plan(a);
    case Algo::hierarchical: return hierarchical_plan(a);
    case Algo::rabenseifner: return rabenseifner_plan(a);
  }
  return {};
}

}  // namespace strata
