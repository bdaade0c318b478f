#include "core/placement.hpp"

#include <sched.h>

namespace strata {

int own_cpu(int rank, const std::vector<RankCpus>& ranks) {
  const RankCpus& me = ranks[static_cast<size_t>(rank)];
  int local = 0;  // ranks of this machine before this one
  int on_machine = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].machine != me.machine) continue;
    if (static_cast<int>(r) < rank) ++local;
    ++on_machine;
  }
  std::vector<int> cpus;
  for (size_t w = 0; w < me.mask.size(); ++w)
    for (int b = 0; b < 64; ++b)
      if (me.mask[w] >> b & 1) cpus.push_back(static_cast<int>(w * 64 + static_cast<size_t>(b)));
  if (cpus.size() < 2 || static_cast<int>(cpus.size()) < on_machine) return -1;
  return cpus[static_cast<size_t>(local)];
}

void move_to_cpu(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getcpu() == cpu) return;
  cpu_set_t mask, one;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0 || !CPU_ISSET(cpu, &mask)) return;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  // Setting the one-CPU mask moves the thread before the call returns; the full mask
  // given back lets the scheduler move it again.
  if (sched_setaffinity(0, sizeof one, &one) == 0) (void)sched_setaffinity(0, sizeof mask, &mask);
}

}  // namespace strata
