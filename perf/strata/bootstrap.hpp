// How strata-perf's ranks find each other: under any launcher the library knows
// (strata-run, torchrun, mpirun, srun; docs/launcher.md), Comm::init_from_env(); started
// by hand, a single rank (STRATA_SOCKET_IFNAME=lo unless set). strata-perf does not use
// MPI: under mpirun the library reads OpenMPI's variables and PMIx.
//
// With ranks as threads (-t N) each process has N ranks, numbered process by process
// (process p's thread t is rank p * N + t of a job of processes x N ranks, as nccl-tests
// numbers them): the processes first make a communicator of their own, over which
// process 0 hands out the unique id the threads' communicators are made from.
#pragma once

#include "strata/strata.hpp"

namespace perf {

// Thread `thread` of this process's `threads` joins the job (called on each thread at
// once). Throws strata::Error when the job cannot start.
strata::Comm join_job(int thread = 0, int threads = 1);

}  // namespace perf
