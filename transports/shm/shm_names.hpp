// Names of the shared-memory segments in /dev/shm: "strata-<the first 12 hex digits of the
// job's secret>-<communicator tag>-<rank>". strata-run (which does not link libstrata)
// removes what a job's ranks left behind by this prefix: a rank killed between creating
// its segment and its peers mapping it never unlinks it.
#pragma once

#include <string>
#include <string_view>

namespace strata {

inline std::string shm_job_prefix(std::string_view secret_hex) {
  return "strata-" + std::string(secret_hex.substr(0, 12)) + "-";
}

}  // namespace strata
