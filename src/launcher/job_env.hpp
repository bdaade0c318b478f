// What a Strata job needs in its environment: where rank 0 listens and the job's secret.
#pragma once

#include <string>
#include <vector>

namespace strata::launcher {

struct JobIdentity {
  std::string root;    // "127.0.0.1:PORT"
  std::string secret;  // 32 lowercase hex digits
};

// Where one rank sits in the job. Local values equal the global ones on a single host;
// they are separate so that a multi-host layout can fill them differently.
struct RankPlacement {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
};

// Throws std::system_error when no port or no randomness can be had.
JobIdentity make_job_identity();

// `base` (a null-terminated list like environ) with every STRATA_* variable that
// strata-run sets replaced by this rank's value.
std::vector<std::string> rank_environment(const char* const* base, const JobIdentity& job,
                                          const RankPlacement& where);

}  // namespace strata::launcher
