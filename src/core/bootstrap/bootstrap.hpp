// Bootstrap: every rank joins the root (one short connection each), which, once all have
// joined, sends the table of all ranks (where each listens, which host it is on) down a
// binomial tree over the ranks' own listeners (algorithms/connections.hpp): no rank holds
// more than a few connections at once, and none sends the table more than ceil(log2 n)
// times. Connections are then made rank to rank, on need (core/connector.hpp).
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
  int32_t transport;     // the id of the transport row STRATA_TRANSPORT forces on every rank (ucx, ibverbs); 0: none
  uint64_t plan_settings;  // a hash of the settings that shape plans, which every rank must share
  uint64_t link_settings;  // a hash of the settings both ends of a link must share (UCX's put slots)
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

// The tag of a job's first communicator: the table is delivered to listeners under it.
inline constexpr uint64_t kWorldTag = 1;

// Starts the root in a detached thread that owns `listener`; it serves one job of
// whatever size the first joiner announces, then exits (or gives up after timeout_s).
void start_root(net::Fd listener, const Secret& secret, double timeout_s);

// Joins the root, then waits on `in` (this rank's communicator listener, whose port
// `mine.listen` carries; the address is the one this rank reaches the root from) for the
// table, passes it on to this rank's children in the tree, and returns every rank's info,
// indexed by rank. What else `in` took meanwhile (peers that had the table already and
// called this rank) stays in it, for the communicator.
std::vector<RankInfo> join(const net::SockAddr& root, const Secret& secret, int rank, int nranks, RankInfo mine,
                           net::Incoming& in, net::Deadline deadline);

}  // namespace strata::bootstrap
