#include "mesh.hpp"

#include <cstdio>
#include <cstring>

#include "log.hpp"
#include "transports/shm/shm_link.hpp"
#include "transports/tcp/tcp_link.hpp"

namespace strata {

using bootstrap::RankInfo;

bool use_shm(const RankInfo& a, const RankInfo& b) {
  return !a.force_tcp && !b.force_tcp && std::strncmp(a.host, b.host, sizeof a.host) == 0;
}

namespace {

int data_sockets(const RankInfo& a, const RankInfo& b) {
  return use_shm(a, b) ? 0 : std::min(a.tcp_nsocks, b.tcp_nsocks);
}

std::string peer_name(int r) { return "rank " + std::to_string(r); }

// Shared-memory peers of `r`, in rank order: ring i of r's segment receives from peer i.
std::vector<int> shm_peers(int r, const std::vector<RankInfo>& table) {
  std::vector<int> out;
  for (int j = 0; j < static_cast<int>(table.size()); ++j)
    if (j != r && use_shm(table[r], table[j])) out.push_back(j);
  return out;
}

int index_of(const std::vector<int>& v, int x) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == x) return static_cast<int>(i);
  return -1;
}

std::string segment_name(const bootstrap::Secret& s, uint64_t tag, int rank) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "/strata-%02x%02x%02x%02x%02x%02x-%llx-%d", s.bytes[0], s.bytes[1], s.bytes[2],
                s.bytes[3], s.bytes[4], s.bytes[5], static_cast<unsigned long long>(tag), rank);
  return buf;
}

// Everyone in `peers` sends us `token` and we send it to them.
void exchange_token(Mesh& m, const std::vector<int>& peers, char token, net::Deadline deadline) {
  for (int j : peers) net::send_all(m.control[j].get(), &token, 1, deadline, peer_name(j));
  for (int j : peers) {
    char got = 0;
    net::recv_all(m.control[j].get(), &got, 1, deadline, peer_name(j));
    if (got != token) throw SystemError("unexpected setup message from " + peer_name(j));
  }
}

void connect_shm(Mesh& m, int rank, const std::vector<RankInfo>& table, const bootstrap::Secret& secret,
                 uint64_t tag, const Config& cfg, net::Deadline deadline) {
  std::vector<int> mine = shm_peers(rank, table);
  if (mine.empty()) return;
  auto own = ShmSegment::create(segment_name(secret, tag, rank), static_cast<int>(mine.size()), cfg.shm_ring_bytes);
  exchange_token(m, mine, 'S', deadline);  // every segment exists
  for (int j : mine) {
    auto theirs = ShmSegment::open(segment_name(secret, tag, j));
    int me_there = index_of(shm_peers(j, table), rank);
    if (me_there < 0 || me_there >= theirs->nrings()) throw InternalError("shared memory layout mismatch with " + peer_name(j));
    ShmRing* out = theirs->ring(me_there);
    ShmRing* in = own->ring(index_of(mine, j));
    m.links[j] = std::make_unique<ShmLink>(j, out, in, std::move(theirs), own);
  }
  exchange_token(m, mine, 'M', deadline);  // every peer has mapped ours
  own->unlink();
}

}  // namespace

Mesh connect_mesh(int rank, const std::vector<RankInfo>& table, const net::Fd& listener,
                  const bootstrap::Secret& secret, uint64_t tag, const Config& cfg, net::Deadline deadline) {
  const int n = static_cast<int>(table.size());
  Mesh m;
  m.links.resize(n);
  m.control.resize(n);
  std::vector<std::vector<net::Fd>> data(n);
  for (int j = 0; j < n; ++j) data[j].resize(static_cast<size_t>(j == rank ? 0 : data_sockets(table[rank], table[j])));

  // Higher ranks call lower ones; the listen backlog holds calls until they are accepted.
  auto call = [&](int j, net::Role role, int index) {
    net::Fd fd = net::connect_to(table[j].listen, deadline);
    net::Hello h = net::make_hello(secret.bytes, tag, rank, n, role, index);
    net::send_all(fd.get(), &h, sizeof h, deadline, peer_name(j));
    return fd;
  };
  for (int j = 0; j < rank; ++j) {
    m.control[j] = call(j, net::Role::control, 0);
    for (size_t i = 0; i < data[j].size(); ++i) data[j][i] = call(j, net::Role::data, static_cast<int>(i));
  }
  size_t expected = 0;
  for (int j = rank + 1; j < n; ++j) expected += 1 + data[j].size();
  while (expected > 0) {
    auto [fd, h] = net::accept_authenticated(listener.get(), secret.bytes, tag, deadline);
    int j = h.rank;
    bool ok = j > rank && j < n && h.nranks == n;
    net::Fd* slot = nullptr;
    if (ok && h.role == net::Role::control) slot = &m.control[j];
    if (ok && h.role == net::Role::data && h.index >= 0 && h.index < static_cast<int>(data[j].size())) slot = &data[j][h.index];
    if (!slot || slot->valid()) {
      STRATA_WARN("dropped an unexpected connection (rank %d of %d, role %d)", h.rank, h.nranks, static_cast<int>(h.role));
      continue;
    }
    *slot = std::move(fd);
    --expected;
  }

  connect_shm(m, rank, table, secret, tag, cfg, deadline);
  for (int j = 0; j < n; ++j) {
    if (j == rank) continue;
    if (!m.links[j]) m.links[j] = std::make_unique<TcpLink>(j, std::move(data[j]), cfg.staging_bytes);
    STRATA_INFO("rank %d -> rank %d via %s%s", rank, j, m.links[j]->name(),
                use_shm(table[rank], table[j]) ? " (same host)"
                                               : (std::string(" (") + std::to_string(data_sockets(table[rank], table[j])) +
                                                  " sockets, " + table[j].listen.str() + ")").c_str());
  }
  return m;
}

}  // namespace strata
