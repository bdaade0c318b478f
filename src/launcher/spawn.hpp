// Starting one rank: fork + execvp with the rank's environment, in its own process group.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace strata::launcher {

struct RankProcess {
  pid_t pid = -1;  // also the id of the rank's process group
  int stdout_fd = -1;  // read ends of the pipes that carry the rank's output
  int stderr_fd = -1;
};

// Starts `command` (looked up in PATH) as rank `rank` with stdin from /dev/null and
// stdout/stderr into new pipes. Throws std::system_error when no process can be made. If
// the command cannot be executed, the child says so on its stderr and exits with 127.
// With netns_fd >= 0 the rank runs in that network namespace (setns before exec; if that
// fails, the child says so and exits with 127).
RankProcess spawn_rank(int rank, const std::vector<std::string>& command,
                       const std::vector<std::string>& environment, int netns_fd = -1);

}  // namespace strata::launcher
