// Names of the shared-memory segments in /dev/shm: "strata-<the first 12 hex digits of the
// job's secret>-<communicator tag>-<rank>-<pid>-<count>" (a job may make two communicators
// of one tag, each world made by init_from_env; the peer learns the name with the
// connection info). strata-run (which does not link libstrata) removes what a job's ranks
// left behind by this prefix: a rank killed before a peer opened its segment through its
// descriptor never unlinks it.
#pragma once

#include <dirent.h>
#include <sys/mman.h>

#include <string>
#include <string_view>

namespace strata {

inline std::string shm_job_prefix(std::string_view secret_hex) {
  return "strata-" + std::string(secret_hex.substr(0, 12)) + "-";
}

// Unlinks the job's segments still in /dev/shm. Only once every rank of the job is gone:
// a live rank's segment may not have been mapped by all its peers yet.
inline void remove_job_segments(std::string_view secret_hex) {
  const std::string prefix = shm_job_prefix(secret_hex);
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) == 0) ::shm_unlink(("/" + name).c_str());
  }
  ::closedir(dir);
}

}  // namespace strata
