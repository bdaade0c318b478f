// How strata-perf's ranks find each other: under any launcher the library knows
// (strata-run, torchrun, mpirun, srun; docs/launcher.md), Comm::init_from_env(); started
// by hand, a single rank (STRATA_SOCKET_IFNAME=lo unless set). strata-perf does not use
// MPI: under mpirun the library reads OpenMPI's variables and PMIx.
#pragma once

#include "strata/strata.hpp"

namespace perf {

// Throws strata::Error when the job cannot start.
strata::Comm join_job();

}  // namespace perf
