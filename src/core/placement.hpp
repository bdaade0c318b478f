// Where a new communicator's ranks start running: each rank of a machine on a CPU of its
// own, when there are enough.
//
// Ranks fresh from bootstrap often share one CPU on a busy machine: a rank woken by a
// socket is placed on its waker's CPU when its own is busy, and the engine's spinning and
// yielding never block, so nothing gives the scheduler a reason to move them apart. On a
// loaded machine most short two-rank runs stayed on one CPU, several times slower a call
// than on two (docs/benchmarks.md, "Measured choices"). So at
// creation each thread is moved once to the CPU it would have if the machine's ranks were
// laid out in rank order over their CPUs, and its CPU mask is given back at once: a hint,
// not a binding (the scheduler moves it again as it likes, and threads it starts are not
// affected).
#pragma once

#include <vector>

#include "algorithms/hierarchy.hpp"

namespace strata {

// The CPU `rank` starts on: with the ranks of its machine in rank order, the i-th takes the
// i-th CPU of its own mask. -1 (leave it be) where its mask has one CPU or fewer CPUs than
// the machine has ranks (some share a CPU anyway).
int own_cpu(int rank, const std::vector<RankCpus>& ranks);

// Moves the calling thread to `cpu` (own_cpu's) and restores its mask; nothing for -1.
void move_to_cpu(int cpu);

}  // namespace strata
