// Named network namespaces (iproute2's, in /run/netns) for the emulated cluster: making
// and removing them, the lock that marks a run's namespaces as in use, and the removal of
// namespaces left behind by runs that died without cleaning up.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace strata::launcher {

// Whether this process has CAP_NET_ADMIN and CAP_SYS_ADMIN (needed to make, enter and
// mount network namespaces): the message for the user, or an empty string.
std::string missing_netns_privileges();

// "strata-<pid>-": every namespace of the run with this pid is named with it.
std::string netns_prefix(pid_t pid);

// `ip netns add NAME` and `ip -n NAME link set lo up`. Throws std::runtime_error.
void add_netns(const std::string& name);

// An fd for setns(CLONE_NEWNET) (close-on-exec). Throws std::system_error.
int open_netns(const std::string& name);

// SIGKILLs every process whose network namespace is the one `netns_fd` refers to, until
// none is left (gives up after about a second). Returns how many were killed.
int kill_processes_in(int netns_fd);

// Kills whatever still runs in each namespace, then `ip netns del`s it. Namespaces that do
// not exist are skipped. Returns one message per failure (never throws).
std::vector<std::string> remove_netns(const std::vector<std::string>& names);

// Marks this run's namespaces as in use: an flock on /run/strata-run/<pid>.lock, held as
// long as its file description is open in any process (strata-run and its watchdog). A
// run that dies for good releases it, which is how a later run tells its namespaces are
// stale.
class RunLock {
 public:
  RunLock() = default;
  // Waits for the lock (only another run's stale-namespace sweep holds it, briefly; gives
  // up after 10 s). Throws std::system_error.
  static RunLock acquire(pid_t pid);
  ~RunLock();  // closes; the file stays for as long as another holder may need it
  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;

  // Removes the lock file and lets go of the lock. Call when the namespaces are gone.
  void release_and_remove();
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Removes the namespaces in /run/netns named strata-<pid>-... whose run no longer holds
// its lock (it was killed together with its watchdog), and those named with `self` (a
// pid this process now has, so whatever has its name is left over). The caller must hold
// its own RunLock. Returns one line per run cleaned up or failure, for stderr.
std::vector<std::string> sweep_stale_netns(pid_t self);

}  // namespace strata::launcher
