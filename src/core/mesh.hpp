// Connection setup: every rank of a communicator connects to every other one, a control
// socket per peer (liveness, goodbye and abort notices) plus, per memory kind, a data link
// from the row of the transport table both ends of the pair choose over it: shared memory
// on the same host, between hosts ucx or ibverbs when both ends have RDMA, else tcp;
// STRATA_TRANSPORT forces one (docs/transports.md).
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "core/bootstrap/bootstrap.hpp"
#include "ground/memory_kind.hpp"
#include "ground/settings.hpp"
#include "transports/transport.hpp"

namespace strata {

using Links = std::vector<std::unique_ptr<Link>>;  // by peer rank; null for this rank

struct Mesh {
  std::array<Links, kNumMemoryKinds> links;  // by memory kind: the links that carry it
  std::vector<net::Fd> control;              // by peer rank; invalid for this rank
  Links& of(MemoryKind k) { return links[static_cast<size_t>(k)]; }
  const Links& of(MemoryKind k) const { return links[static_cast<size_t>(k)]; }
};

// Hosts of ranks a and b share memory and neither forces tcp.
bool use_shm(const bootstrap::RankInfo& a, const bootstrap::RankInfo& b);

// Collective over the ranks in `table`. `listener` is where this rank accepts (its port is
// table[rank].listen's); connections must present `secret` and `comm_tag`.
Mesh connect_mesh(int rank, const std::vector<bootstrap::RankInfo>& table, const net::Fd& listener,
                  const bootstrap::Secret& secret, uint64_t comm_tag, const Config& cfg, net::Deadline deadline);

}  // namespace strata
