// How strata-perf's ranks find each other, in this order:
//  1. STRATA_RANK is set (under strata-run): Comm::init_from_env().
//  2. Under mpirun (OMPI_COMM_WORLD_SIZE or PMI_SIZE set) and built with MPI
//     (STRATA_PERF_WITH_MPI): MPI_Init; when every rank is on one host and
//     STRATA_SOCKET_IFNAME is unset, set it to "lo"; rank 0 calls get_unique_id() and
//     MPI_Bcast's it; Comm::init_rank(size, id, rank). MPI_Finalize when done.
//  3. Otherwise a single rank: STRATA_SOCKET_IFNAME=lo unless set, init_rank(1, id, 0).
#pragma once

#include <memory>

#include "strata/strata.hpp"

namespace perf {

enum class Launch { strata_run, mpi, single };

Launch detect_launch();
const char* name(Launch l);

// Keeps MPI initialized (when used) for the life of the job.
class LaunchSession {
 public:
  virtual ~LaunchSession() = default;
  virtual void abort_job() noexcept {}  // MPI_Abort under MPI; nothing otherwise
};

struct Joined {
  strata::Comm comm;
  std::unique_ptr<LaunchSession> session;  // destroy after comm.destroy()
};

// Throws strata::Error or std::runtime_error when the job cannot start.
Joined join_job();

}  // namespace perf
