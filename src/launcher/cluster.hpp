// The emulated cluster of `strata-run --hosts H`: one network namespace per host, joined by
// veth links (directly for 2 hosts, through a bridge in a "switch" namespace for more),
// optionally shaped with tbf, and removed again when the run ends.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "job_env.hpp"
#include "netns.hpp"
#include "tc.hpp"

namespace strata::launcher {

// An IPv4 subnet for the hosts' addresses; host h gets the (h+1)-th address in it.
struct Subnet {
  uint32_t network = 0;  // host byte order, host bits zero
  int prefix_len = 0;
  int max_hosts() const;  // addresses other than the network and broadcast ones
  std::string host_address(int host) const;
  std::string text() const;  // "10.231.0.0/24"
};

// "A.B.C.D/LEN" with LEN 8..30 and the host bits zero; nothing otherwise.
std::optional<Subnet> parse_subnet(std::string_view text);
Subnet default_subnet();  // 10.231.0.0/24

// The port rank 0's bootstrap root listens on, in host 0's own namespace (always free).
constexpr int kClusterRootPort = 29500;

// Ranks go to hosts in consecutive blocks, as evenly as possible: with N = q*H + r, the
// first r hosts get q+1 ranks and the others q (ranks 0..q on host 0, and so on).
int host_of_rank(int rank, int nranks, int hosts);
RankPlacement place_rank(int rank, int nranks, int hosts);

struct ClusterSpec {
  int hosts = 1;
  int nranks = 1;
  Subnet subnet = default_subnet();
  std::optional<LinkRate> rate;  // none: links are not shaped
};

// Forked before anything is made: if strata-run dies without tearing the cluster down
// (SIGKILL), this helper notices (its pipe from strata-run closes) and does it.
class Watchdog {
 public:
  Watchdog() = default;
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  // The helper runs remove_netns(names) and removes the lock file unless disarmed.
  void start(const std::vector<std::string>& names, const std::string& lock_path);
  // Everything is cleaned up: tells the helper to exit, and waits for it.
  void disarm();

 private:
  pid_t pid_ = -1;
  int pipe_fd_ = -1;
};

class EmulatedCluster {
 public:
  // Builds the namespaces, links and shaping. Throws std::runtime_error (after removing
  // whatever it had made) when it cannot: no privileges, iproute2 missing or failing.
  explicit EmulatedCluster(const ClusterSpec& spec);
  // Removes everything, reporting failures on stderr.
  ~EmulatedCluster();
  EmulatedCluster(const EmulatedCluster&) = delete;
  EmulatedCluster& operator=(const EmulatedCluster&) = delete;

  // STRATA_ROOT for every rank: host 0's address and kClusterRootPort.
  std::string root_address() const;
  RankPlacement placement(int rank) const;
  // For setns(CLONE_NEWNET) in the rank's child process.
  int netns_fd_of_rank(int rank) const;
  // SIGKILLs processes still in the hosts' namespaces (those that left their rank's
  // process group): once every rank has exited, nothing of the job may live on there.
  void kill_strays() const;

 private:
  void build();
  void wait_for_carrier();  // every host's eth0 is up
  void teardown() noexcept;
  std::vector<std::string> all_names() const;

  ClusterSpec spec_;
  std::vector<std::string> host_ns_;  // strata-<pid>-h<i>
  std::string switch_ns_;             // strata-<pid>-sw, only for 3 or more hosts
  std::vector<int> host_fds_;
  RunLock lock_;
  Watchdog watchdog_;
};

}  // namespace strata::launcher
