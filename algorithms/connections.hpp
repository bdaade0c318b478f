// Which connections a rank makes besides those its plans use, as pure functions of its rank
// and the job's size: the library (core/connector, core/bootstrap) and strata-sim's
// creation cost read the same answers.
//
// - The bootstrap's table travels from the root down a binomial tree over the ranks: rank
//   r receives it from bootstrap_parent(r) and passes it on to bootstrap_children(r), so
//   no rank opens more than ceil(log2 n) connections and the last rank has it after
//   ceil(log2 n) + 1 hops.
// - The failure overlay: each rank holds a control connection to the ranks before and
//   after it in a ring from the start, so a failure notice reaches every rank (a ring
//   less one rank is still a path), whatever its plans connect later.
#pragma once

#include <vector>

namespace strata {

// Rank 0's parent is the bootstrap root itself (-1).
inline int bootstrap_parent(int rank) {
  if (rank <= 0) return -1;
  int high = 1;
  while (high * 2 <= rank) high *= 2;
  return rank - high;
}

inline std::vector<int> bootstrap_children(int rank, int nranks) {
  std::vector<int> out;
  int step = 1;
  while (step <= rank) step *= 2;
  for (; rank + step < nranks; step *= 2) out.push_back(rank + step);
  return out;
}

// Ascending, without this rank; empty for one rank.
inline std::vector<int> overlay_peers(int rank, int nranks) {
  if (nranks <= 1) return {};
  const int prev = (rank + nranks - 1) % nranks, next = (rank + 1) % nranks;
  if (prev == next) return {prev};
  return prev < next ? std::vector<int>{prev, next} : std::vector<int>{next, prev};
}

}  // namespace strata
