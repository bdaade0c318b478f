// Passing rank 0's unique id to the other ranks when they know no address of it: through
// a file all ranks can read, or the launcher's PMIx key-value store (mpirun, srun
// --mpi=pmix). Rank 0 makes the id; if making it fails, every rank gets the error.
#pragma once

#include <functional>
#include <string>

#include "ground/socket.hpp"
#include "strata/strata.hpp"

namespace strata::bootstrap {

using MakeId = std::function<UniqueId()>;

// Rank 0 writes the id (or its error) to `path`, atomically; the others wait until the
// file holds `job_id`'s id. A file left by another job is never taken for this one's
// when the launcher names the job.
UniqueId share_id_by_file(const std::string& path, const std::string& job_id, int rank, const MakeId& make,
                          net::Deadline deadline);

// What rank 0 published, as read from the file or PMIx ("ok <hex id>" or "error <what>"):
// the id, PeerError for rank 0's error, InvalidArgument naming `where` for anything else.
UniqueId id_from_text(const std::string& published, const std::string& where);

// Whether this libstrata was built with PMIx (libpmix-dev).
bool pmix_built();
// Every rank of the PMIx namespace calls it (a fence); InvalidUsage when not built with PMIx.
UniqueId share_id_by_pmix(int rank, const MakeId& make, double timeout_s);
// The job's size from PMIx, for launchers that set only PMIX_RANK.
int pmix_job_size();

}  // namespace strata::bootstrap
