// Bootstrap: every rank joins the root, which answers with the table of all ranks
// (where each listens, which host it is on). Connections are then made rank to rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/bootstrap/unique_id.hpp"
#include "ground/socket.hpp"

namespace strata::bootstrap {

// What a rank tells the others about itself; sent as bytes, so trivially copyable.
struct RankInfo {
  net::SockAddr listen;  // where this rank accepts connections for the communicator
  char host[160];        // host identity: ranks with the same one share memory
  int32_t tcp_nsocks;    // STRATA_TCP_NSOCKS of this rank
  int32_t force_tcp;     // STRATA_TRANSPORT=tcp on this rank
  char machine[40];      // kernel boot id: ranks with the same one share CPUs, whatever their host
  uint64_t cpus[16];     // CPUs this rank may run on (its affinity mask), one bit each
  int32_t check;         // STRATA_CHECK of this rank
  int32_t pad;
  uint64_t plan_settings;  // a hash of the settings that shape plans, which every rank must share
};

// A RankInfo that came from another process (the root's table, a split's all-gather):
// its strings are terminated, its address is IPv4 or IPv6, its socket count one that
// STRATA_TCP_NSOCKS allows. Throws SystemError naming `from` and the field otherwise.
void check_rank_info(const RankInfo& info, const std::string& from);
// The root's answer as received: `nranks` RankInfo, each checked.
std::vector<RankInfo> decode_rank_table(const void* bytes, size_t n, int nranks, const std::string& from);

// This process's host identity: STRATA_HOST if set, else hostname, boot id and network
// namespace (a different namespace is a different host).
std::string host_identity();

// The kernel this process runs on (its boot id): network namespaces and STRATA_HOST make
// separate hosts, but not separate CPUs.
std::string machine_identity();

// Starts the root in a detached thread that owns `listener`; it serves one job of
// whatever size the first joiner announces, then exits (or gives up after timeout_s).
void start_root(net::Fd listener, const Secret& secret, double timeout_s);

// Joins the root and returns every rank's info, indexed by rank. `mine.listen` need only
// carry the port: the address is the one this rank reaches the root from.
std::vector<RankInfo> join(const net::SockAddr& root, const Secret& secret, int rank, int nranks,
                           RankInfo mine, net::Deadline deadline);

}  // namespace strata::bootstrap
